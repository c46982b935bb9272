# Glue (not part of the source): the package's config helper the file imports (not used by the attention).
import sys
import types

_mingpt, _utils = types.ModuleType("mingpt"), types.ModuleType("mingpt.utils")
_utils.CfgNode = dict
sys.modules.setdefault("mingpt", _mingpt)
sys.modules.setdefault("mingpt.utils", _utils)
