# Found first when this folder leads PYTHONPATH (`python -m oar.mock --path`): `import torch`
# in any script then gives oar, with torch.nn, torch.nn.functional, torch.optim... mapped too.
import oar

oar.mock_torch(enable=True)  # replaces sys.modules["torch"], which the import returns
