# Glue (not part of the source): the imports the notebook makes earlier on.
import copy
import math

import torch
import torch.nn as nn
