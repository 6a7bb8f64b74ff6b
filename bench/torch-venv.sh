# Sourced by the bench scripts that run the PyTorch reference: installs torch into bench/.venv on
# first use (several GB from PyPI; a few minutes) and sets `py`, the command that runs Python
# there. Not a test: CI never runs it.
TORCH_VERSION=2.15.0
venv=bench/.venv
if ! "$venv/bin/python" -c "import torch" 2> /dev/null; then
  echo "== installing torch $TORCH_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "torch==$TORCH_VERSION"
fi
# torch warns at import that NumPy is missing; nothing here uses NumPy.
py=("$venv/bin/python" -W "ignore:Failed to initialize NumPy")
