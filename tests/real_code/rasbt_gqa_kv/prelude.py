# Glue (not part of the source): the tokenizer the script imports is not in the sandbox and not used here.
import sys
import types

sys.modules.setdefault("tiktoken", types.ModuleType("tiktoken"))
