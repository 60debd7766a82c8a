"""The container images: the stock llama.cpp DLC of the region (dlc.py) and the decision image built FROM it in
CodeBuild (decision_image.py)."""
