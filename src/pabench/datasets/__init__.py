"""Datasets: MNIST sources, procedural textures and the DiagViB-6 style generator."""
