"""torch modules for the backend tests, with seeded random weights: an MLP, ResNet-18, a
transformer encoder block, and a module whose data-dependent branch breaks the graph."""

import torch
from torch import nn


def seeded(module: nn.Module, seed: int = 0) -> nn.Module:
    """The module in eval mode with weights (and batch-norm statistics) drawn from `seed`."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else 1
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * (2.0 / fan_in) ** 0.5)
            elif name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.copy_(1.0 + 0.1 * torch.rand(b.shape, generator=g))
    return module.eval()


class MLP(nn.Module):
    """Linear-ReLU-Linear-ReLU-Linear."""

    def __init__(self, d_in: int = 64, hidden: int = 128, d_out: int = 10):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x):
        return self.net(x)


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with batch norm and a residual."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18 (torchvision's layout: 7x7 stem, four stages of two basic blocks)."""

    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def encoder_block(d_model: int = 384, heads: int = 6, ffn: int = 1536) -> nn.Module:
    """A transformer encoder block (post-norm, GELU), batch first."""
    return nn.TransformerEncoderLayer(
        d_model, heads, ffn, dropout=0.0, activation="gelu", batch_first=True
    )


class Branchy(nn.Module):
    """A data-dependent branch (on the sign of a sum): Dynamo breaks the graph there."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)
        self.fc3 = nn.Linear(d, d)

    def forward(self, x):
        y = torch.tanh(self.fc1(x))
        if y.sum() > 0:
            y = self.fc2(y)
        else:
            y = -self.fc3(y)
        return torch.softmax(y, dim=-1)
