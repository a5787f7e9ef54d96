"""Networks of the average-case robustness experiments that the other experiments do not share:
the paper's post-activation ResNet-18 and a Vision Transformer for 32x32 images.

ResNet-18 (He et al. 2016), as the authors' `models/resnet.py` (AI4LIFE-GROUP/average-case-
robustness) builds it for 32x32 inputs: a 3x3 stem conv with BatchNorm and ReLU (no max-pool),
four stages of two BasicBlocks (64, 128, 256, 512 channels; stride 2 from the second stage on),
each block conv3x3-BN-ReLU-conv3x3-BN plus the shortcut (identity, or 1x1 conv + BN where the
shape changes) and a ReLU *after* the addition; a 4x4 average pool and a linear layer.

The Transformer: the paper trains "Transformer models" on CIFAR-10 and CIFAR-100 (Section 4) and
names neither the architecture nor its size, and the authors' repository has no transformer.  Ours
is a ViT (Dosovitskiy et al. 2021) sized as ViT-Lite-7/4 of Hassani et al. 2021 ("Escaping the Big
Data Paradigm with Compact Transformers"), a ViT for 32x32 images trained from scratch: 4x4
patches (64 tokens and a class token), 7 pre-LayerNorm encoder layers of width 256 with 4 heads
and a 512-unit GELU MLP, learned position embeddings, the class token's final LayerNorm into a
linear head.  Attention is written out (matmul, softmax) so that the gradient-norm penalty can
differentiate through it twice.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pabench.models import BasicBlock


# ---------------------------------------------------------------------------------------------
# Post-activation ResNet-18

class ResNet18(nn.Module):
    """The paper's ResNet-18 for 32x32 images; `width` is the first stage's channels (64 in the
    paper; the later stages double it).  Its parameters carry the authors' names (conv1, bn1,
    layer1-layer4, linear), so that their published state dict loads as it is."""

    def __init__(self, num_classes: int, in_channels: int = 3, width: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        for k, stride in enumerate((1, 2, 2, 2)):
            cout = width * 2 ** k
            self.add_module(f"layer{k + 1}", nn.Sequential(BasicBlock(cin, cout, stride),
                                                          BasicBlock(cout, cout, 1)))
            cin = cout
        self.linear = nn.Linear(cin, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        # The authors pool 4x4 windows (the whole 4x4 map of a 32x32 input): a global average.
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


# ---------------------------------------------------------------------------------------------
# Vision Transformer

@dataclass(frozen=True)
class ViTSize:
    patch: int
    depth: int
    width: int
    heads: int
    mlp: int


class _Attention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))


class _EncoderLayer(nn.Module):
    """Pre-LayerNorm: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, width: int, heads: int, mlp: int):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(width), _Attention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, mlp), nn.GELU(), nn.Linear(mlp, width))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Patches (a conv of kernel = stride = patch) and a class token, learned position
    embeddings, pre-LN encoder layers, the class token's LayerNorm into a linear head."""

    def __init__(self, size: ViTSize, num_classes: int, in_channels: int, image_size: int):
        super().__init__()
        if image_size % size.patch or size.width % size.heads:
            raise ValueError(f"ViT: image size {image_size} must be a multiple of the patch "
                             f"{size.patch}, width {size.width} of the heads {size.heads}")
        tokens = (image_size // size.patch) ** 2 + 1
        self.embed = nn.Conv2d(in_channels, size.width, size.patch, size.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, size.width))
        self.pos = nn.Parameter(torch.zeros(1, tokens, size.width))
        self.layers = nn.Sequential(*[_EncoderLayer(size.width, size.heads, size.mlp)
                                      for _ in range(size.depth)])
        self.norm = nn.LayerNorm(size.width)
        self.head = nn.Linear(size.width, num_classes)
        nn.init.trunc_normal_(self.pos, std=0.02)
        nn.init.trunc_normal_(self.cls, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        tokens = self.embed(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(len(x), -1, -1), tokens], dim=1) + self.pos
        return self.head(self.norm(self.layers(tokens)[:, 0]))
