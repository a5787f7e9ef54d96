"""The average-case experiment's networks: the paper's post-activation ResNet-18 (the authors'
models/resnet.py) and the ViTs standing in for the paper's unnamed Transformer."""
import numpy as np
import pytest
import torch
from torch import nn

from pabench.experiments.avgcase import models
from pabench.experiments.avgcase.training import VIT_SIZES, build, step


def _forward_backward(model, shape, classes):
    x = torch.rand(2, *shape, requires_grad=True)
    out = model(x)
    assert out.shape == (2, classes)
    out.sum().backward()
    assert x.grad.abs().sum() > 0
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.parameters() if p.requires_grad)


def test_resnet18_is_the_papers_network_for_32px_images():
    """3x3 stride-1 stem, no max-pool, 4 stages of 2 BasicBlocks (64-512 channels), 11,173,962
    parameters at 10 classes: the count of the authors' ResNet18(num_classes=10)."""
    torch.manual_seed(0)
    net = build("resnet18", (3, 32, 32), 10)
    assert isinstance(net, models.ResNet18)
    assert sum(p.numel() for p in net.parameters()) == 11_173_962
    assert (net.conv1.kernel_size, net.conv1.stride) == ((3, 3), (1, 1))
    assert not any(isinstance(m, (nn.MaxPool2d,)) for m in net.modules())
    blocks = [m for m in net.modules() if isinstance(m, models.BasicBlock)]
    assert [b.conv2.out_channels for b in blocks] == [64, 64, 128, 128, 256, 256, 512, 512]
    shortcuts = [b for b in blocks if not isinstance(b.shortcut, nn.Identity)]
    assert len(shortcuts) == 3 and all(isinstance(b.shortcut[1], nn.BatchNorm2d) for b in shortcuts)
    # The authors' parameter names: their published state dict loads as it is.
    names = list(net.state_dict())
    assert names[:3] == ["conv1.weight", "bn1.weight", "bn1.bias"]
    assert {"layer2.0.shortcut.0.weight", "layer2.0.shortcut.1.running_var", "layer4.1.bn2.bias",
            "linear.weight"} <= set(names) and len(names) == 122
    _forward_backward(net, (3, 32, 32), 10)
    narrow = build("resnet18_w8", (3, 32, 32), 7)
    assert [b.conv2.out_channels for b in narrow.modules() if isinstance(b, models.BasicBlock)] == [
        8, 8, 16, 16, 32, 32, 64, 64]
    _forward_backward(narrow, (3, 32, 32), 7)


def test_a_block_applies_relu_after_adding_the_shortcut():
    """Post-activation: out = ReLU(BN(conv(ReLU(BN(conv(x))))) + shortcut(x)); the sum before the
    ReLU has negative entries, so the ReLU is where the block's zeros come from."""
    torch.manual_seed(0)
    for cin, cout, stride in ((8, 8, 1), (8, 16, 2)):
        block = models.BasicBlock(cin, cout, stride).eval()
        for bn in [m for m in block.modules() if isinstance(m, nn.BatchNorm2d)]:
            bn.running_mean.normal_()
            bn.weight.data.normal_()
        x = torch.randn(3, cin, 8, 8)
        with torch.no_grad():
            inner = torch.relu(block.bn1(block.conv1(x)))
            added = block.bn2(block.conv2(inner)) + block.shortcut(x)
            out = block(x.clone())
        assert added.min() < 0
        torch.testing.assert_close(out, torch.relu(added))


def test_every_block_of_the_resnet18_outputs_relued_activations():
    """Each residual block's output is non-negative (ReLU after the addition); a pre-activation
    block's is not (it adds the shortcut last)."""
    torch.manual_seed(0)
    for arch, nonnegative in (("resnet18_w8", True), ("preact_resnet18_w8", False)):
        net = build(arch, (3, 16, 16), 4).train()
        outs = []
        blocks = [m for m in net.modules()
                  if type(m).__name__ in ("BasicBlock", "_PreActBlock")]
        assert len(blocks) == 8, arch
        for b in blocks:
            b.register_forward_hook(lambda m, i, o: outs.append(o.detach().clone()))
        net(torch.rand(4, 3, 16, 16))
        assert all((o >= 0).all() for o in outs) == nonnegative, arch


def test_vit_sizes_and_a_forward_and_backward_pass():
    """vit: ViT-Lite-7/4's size (4x4 patches, 7 layers, width 256, 4 heads, MLP 512; 3.72 M
    parameters at 10 classes, ~3.7 M published); vit_tiny: 8x8 patches, 2 layers of width 64."""
    torch.manual_seed(0)
    vit = build("vit", (3, 32, 32), 10)
    assert VIT_SIZES["vit"] == models.ViTSize(patch=4, depth=7, width=256, heads=4, mlp=512)
    assert vit.pos.shape == (1, 65, 256) and len(vit.layers) == 7
    assert sum(p.numel() for p in vit.parameters()) == 3_722_250
    _forward_backward(vit, (3, 32, 32), 10)
    tiny = build("vit_tiny", (3, 32, 32), 100)
    assert tiny.pos.shape == (1, 17, 64) and len(tiny.layers) == 2
    _forward_backward(tiny, (3, 32, 32), 100)
    _forward_backward(build("vit_tiny", (1, 32, 32), 10), (1, 32, 32), 10)
    with pytest.raises(ValueError, match="multiple of the patch"):
        build("vit_tiny", (1, 28, 28), 10)


def test_every_patch_reaches_the_class_token():
    """Attention mixes the tokens: the logits' input gradient is non-zero on every patch."""
    torch.manual_seed(0)
    net = build("vit_tiny", (3, 32, 32), 10)
    x = torch.rand(1, 3, 32, 32, requires_grad=True)
    net(x)[0, 3].backward()
    per_patch = x.grad.abs().sum(1)[0].reshape(4, 8, 4, 8).sum((1, 3))
    assert (per_patch > 0).all()


def test_the_gradient_norm_penalty_trains_a_vit():
    """The penalty differentiates the input gradient again (double backward through attention,
    LayerNorm and GELU): a penalised step runs and moves the weights differently from a plain one."""
    x = torch.rand(8, 3, 32, 32)
    y = torch.arange(8) % 3
    after = {}
    for lam in (0.0, 10.0):
        torch.manual_seed(0)
        net = build("vit_tiny", (3, 32, 32), 3)
        loss, sq, _ = step(net, torch.optim.SGD(net.parameters(), lr=0.1), x.clone(), y, lam)
        assert np.isfinite(loss) and sq > 0
        after[lam] = torch.cat([p.detach().flatten() for p in net.parameters()])
    assert not torch.allclose(after[0.0], after[10.0])
