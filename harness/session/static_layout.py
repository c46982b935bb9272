"""The torch module's parameters as the submission's file declares them, read on the host (never run).

The worker reports the module's parameter names and shapes (its MODULE frame); a submission that rewrites its
worker can report a layout the grader accepts while the module holds another. This reads the entry class's
``__init__`` statically — ``self.<name> = nn.Linear(...)``, ``self.<name> = nn.Parameter(...)``,
``self.register_parameter("<name>", ...)``, parameter-free layers — with the constructor's arguments bound, so the
host can compare the report with the file. It is conservative: anything it cannot follow for certain (dynamic
code, a base class other than ``nn.Module``, an unknown layer, a loop or a condition it cannot evaluate, methods
that change what ``named_parameters`` lists) makes the answer *unknown*, never a guess, so a legitimate file is
never failed by it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import operator

from harness.core import pysource

PARAMETER_FREE = frozenset({
    "Dropout", "Dropout1d", "Dropout2d", "Softmax", "LogSoftmax", "Identity", "ReLU", "GELU", "SiLU", "Tanh",
    "Sigmoid", "Flatten", "Unflatten", "LeakyReLU", "ELU", "Mish", "Softplus"})
TENSOR_FACTORIES = frozenset({"empty", "zeros", "ones", "randn", "rand", "Tensor", "FloatTensor", "DoubleTensor"})
INTROSPECTION = frozenset({
    "named_parameters", "parameters", "state_dict", "__getattr__", "__getattribute__", "__setattr__", "__dir__",
    "register_parameter", "_apply", "to", "__new__", "__init_subclass__", "named_modules", "named_children",
    "modules", "children", "_named_members", "_parameters", "__class__", "__dict__"})
# Calls and attributes through which a file could rewrite its class at run time: where one occurs, the answer is
# unknown (reading attributes, getattr, is fine: a file that patches its *worker* needs no more than that).
DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "setattr", "delattr", "__import__", "globals", "vars",
                           "locals"})
DYNAMIC_ATTRS = frozenset({"__dict__", "__class__", "_parameters", "__code__", "__globals__", "_modules",
                           "__setattr__", "__delattr__", "__bases__", "__mro__", "__builtins__"})
MAX_VALUE = 1 << 40
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not}


class Unknown(Exception):
    """The declaration cannot be read statically, for the reason given."""


@dataclasses.dataclass
class Declared:
    params: dict | None      # name -> shape (a tuple, or None when the shape is not knowable); None: unknown
    reason: str = ""         # why it is unknown

    def disagreement(self, reported: list[dict]) -> str | None:
        """A sentence saying how the worker's report differs from the file, or None (agreeing, or unknown)."""
        if self.params is None:
            return None
        found = {p["name"]: tuple(p["shape"]) for p in reported}
        if set(found) != set(self.params):
            return (f"the parameters the worker reported ({', '.join(sorted(found)) or 'none'}) differ from those "
                    f"the class declares in the file ({', '.join(sorted(self.params)) or 'none'})")
        wrong = [n for n, shape in self.params.items() if shape is not None and found[n] != shape]
        if wrong:
            return "; ".join(f"the worker reported {n} with shape {list(found[n])}, the file declares "
                             f"{list(self.params[n])}" for n in sorted(wrong))
        return None


def declared_parameters(source: str, entry: str, args: list, kwargs: dict) -> Declared:
    """The parameters ``entry(*args, **kwargs)`` gets according to the file ``source``, or why that is unknown."""
    try:
        return Declared(_reader(source, entry).read(args, kwargs))
    except Unknown as exc:
        return Declared(None, str(exc))
    except (SyntaxError, ValueError, RecursionError, MemoryError, TypeError, ZeroDivisionError, OverflowError):
        return Declared(None, "the file cannot be read statically")


@functools.lru_cache(maxsize=8)
def _reader(source: str, entry: str) -> "_Reader":
    """One parse and one pass over the file per submission: the suite builds the module many times."""
    return _Reader(source, entry)


class _Reader:
    def __init__(self, source: str, entry: str):
        self.tree = pysource.parse(source)
        self.entry = entry
        self.nn_names = {"nn"}          # names bound to torch.nn
        self.torch_names = {"torch"}
        self.direct: dict[str, str] = {}  # a bare name imported from torch.nn -> its real name (Linear, Parameter)

    # -- the file ---------------------------------------------------------------------------------------------
    def read(self, args: list, kwargs: dict) -> dict:
        if self.cls is None:
            if self.failure is None:
                try:
                    self.cls = self._file()
                except Unknown as exc:
                    self.failure = exc
            if self.failure is not None:
                raise self.failure
        return self._class(self.cls, args, kwargs)

    cls = None
    failure: Unknown | None = None

    def _file(self) -> ast.ClassDef:
        classes = []
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module in ("torch.nn", "torch.nn.parameter",
                                                                       "torch.nn.modules.linear"):
                for alias in node.names:
                    self.direct[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module == "torch":
                for alias in node.names:
                    if alias.name == "nn":
                        self.nn_names.add(alias.asname or "nn")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "torch.nn" and alias.asname:
                        self.nn_names.add(alias.asname)
                    elif alias.name == "torch":
                        self.torch_names.add(alias.asname or "torch")
            if isinstance(node, ast.ClassDef) and node.name == self.entry:
                classes.append(node)
        for node in ast.walk(self.tree):
            self._refuse_dynamic(node)
        if len(classes) != 1:
            raise Unknown(f"the file does not define {self.entry!r} exactly once as a class")
        return classes[0]

    def _class(self, cls: ast.ClassDef, args: list, kwargs: dict) -> dict:
        if cls.decorator_list or cls.keywords or len(cls.bases) != 1 or not self._is_module_base(cls.bases[0]):
            raise Unknown(f"{self.entry} is not a plain subclass of nn.Module")
        init = None
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if item.name in INTROSPECTION:
                    raise Unknown(f"{self.entry} defines {item.name}")
                if item.name == "__init__":
                    init = item
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                if any(not isinstance(t, ast.Name) or t.id in INTROSPECTION or t.id == "__init__" for t in targets):
                    raise Unknown(f"{self.entry} assigns a class attribute it cannot follow")
            elif not isinstance(item, (ast.Expr, ast.Pass)):
                raise Unknown(f"{self.entry}'s body holds a statement it cannot follow")
        if init is None:
            return {}
        return self._init(init, args, kwargs)

    def _refuse_dynamic(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id in DYNAMIC_CALLS or (node.func.id == "type" and len(node.args) > 1)):
            raise Unknown(f"the file calls {node.func.id}()")
        if isinstance(node, ast.Attribute) and (node.attr in DYNAMIC_ATTRS or node.attr in INTROSPECTION - {"to"}
                                                or node.attr == "__init__"):
            if not (node.attr in INTROSPECTION | {"__init__"} and isinstance(node.ctx, ast.Load)):
                raise Unknown(f"the file touches {node.attr}")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name) and sub.id == self.entry and not isinstance(t, ast.Name):
                        raise Unknown(f"the file assigns into {self.entry}")
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            raise Unknown("the file rebinds names with global/nonlocal")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == self.entry \
                and node not in self.tree.body:
            raise Unknown(f"the file defines {self.entry} inside another scope")
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node in self.tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == self.entry for t in targets):
                raise Unknown(f"the file rebinds {self.entry}")

    def _is_module_base(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "Module":
            v = node.value
            return (isinstance(v, ast.Name) and v.id in self.nn_names) or (
                isinstance(v, ast.Attribute) and v.attr == "nn" and isinstance(v.value, ast.Name)
                and v.value.id in self.torch_names)
        return isinstance(node, ast.Name) and self.direct.get(node.id) == "Module"

    def _nn_callee(self, func: ast.AST) -> str | None:
        """The torch.nn name a call's callee is (Linear, Parameter, Dropout, ...), or None."""
        if isinstance(func, ast.Name):
            return self.direct.get(func.id)
        if isinstance(func, ast.Attribute):
            v = func.value
            if (isinstance(v, ast.Name) and v.id in self.nn_names) or (
                    isinstance(v, ast.Attribute) and v.attr == "nn" and isinstance(v.value, ast.Name)
                    and v.value.id in self.torch_names):
                return func.attr
        return None

    # -- __init__ ---------------------------------------------------------------------------------------------
    def _init(self, init: ast.FunctionDef, args: list, kwargs: dict) -> dict:
        a = init.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise Unknown("__init__ takes *args, **kwargs or keyword-only arguments")
        names = [p.arg for p in a.args]
        if not names:
            raise Unknown("__init__ takes no self")
        self.self_name, params = names[0], names[1:]
        if len(args) > len(params):
            raise Unknown("more arguments than __init__ takes")
        env: dict = dict(zip(params, args))
        for key, value in kwargs.items():
            if key not in params or key in env:
                raise Unknown("the constructor's keywords do not bind")
            env[key] = value
        defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults))
        for p in params:
            if p not in env:
                if p not in defaults:
                    raise Unknown(f"no value for {p}")
                env[p] = self._eval(defaults[p], {})
        self.params: dict = {}
        self._block(init.body, env)
        return self.params

    def _block(self, body: list, env: dict) -> None:
        for stmt in body:
            self._stmt(stmt, env)

    def _stmt(self, stmt: ast.stmt, env: dict) -> None:
        if isinstance(stmt, (ast.Pass, ast.Assert, ast.Raise)):
            return
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, ast.Constant):
                return
            if isinstance(stmt.value, ast.Call):
                return self._call_stmt(stmt.value, env)
            raise Unknown("__init__ holds an expression it cannot follow")
        if isinstance(stmt, ast.If):
            try:
                cond = self._eval(stmt.test, env)
            except Unknown:
                if self._touches_self(stmt):
                    raise
                return
            return self._block(stmt.body if cond else stmt.orelse, env)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) != 1 or stmt.value is None:
                raise Unknown("__init__ holds an assignment it cannot follow")
            return self._assign(targets[0], stmt.value, env)
        if self._touches_self(stmt):
            raise Unknown(f"__init__ sets attributes inside a {type(stmt).__name__.lower()} statement")

    def _touches_self(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id == self.self_name:
                return True
        return False

    def _call_stmt(self, call: ast.Call, env: dict) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "__init__":
            return  # super().__init__() / nn.Module.__init__(self)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self.self_name:
            if func.attr == "register_buffer":
                return
            if func.attr == "register_parameter" and len(call.args) == 2 and not call.keywords:
                name = call.args[0]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    raise Unknown("register_parameter with a computed name")
                return self._parameter(name.value, call.args[1], env)
            raise Unknown(f"__init__ calls self.{func.attr}()")
        if self._touches_self(call):
            raise Unknown("__init__ passes self to a call it cannot follow")

    def _assign(self, target: ast.AST, value: ast.AST, env: dict) -> None:
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) \
                and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts):
            pairs = list(zip(target.elts, value.elts))  # self.h, self.dk = n_heads, d_model // n_heads
            if any(not self._plain_value(v) for _, v in pairs):
                raise Unknown("a tuple assignment of calls")
            for t, v in pairs:
                self._assign(t, v, env)
            return
        if isinstance(target, ast.Name):
            if self._touches_self(value) and not self._plain_value(value):
                raise Unknown(f"{target.id} takes a value from self it cannot follow")
            try:
                env[target.id] = self._eval(value, env)
            except Unknown:
                env.pop(target.id, None)
            return
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == self.self_name):
            if self._touches_self(target):
                raise Unknown("__init__ assigns into something of self it cannot follow")
            return
        attr = target.attr
        if any(n == attr or n.startswith(attr + ".") for n in self.params):
            raise Unknown(f"self.{attr} is assigned twice")
        if isinstance(value, ast.Call):
            callee = self._nn_callee(value.func)
            if callee == "Linear":
                return self._linear(attr, value, env)
            if callee == "Parameter":
                return self._parameter(attr, value, env)
            if callee in PARAMETER_FREE:
                return
            if self._is_tensor_call(value):
                return  # a plain tensor attribute, not a parameter
            raise Unknown(f"self.{attr} is set by a call it cannot follow")
        if self._touches_self(value) and not self._plain_value(value):
            raise Unknown(f"self.{attr} takes a value from self it cannot follow")
        try:
            env[f"self.{attr}"] = self._eval(value, env)
        except Unknown:
            if not isinstance(value, (ast.Constant, ast.BinOp, ast.Name, ast.Attribute, ast.UnaryOp, ast.Call)):
                raise
            env.pop(f"self.{attr}", None)
            if isinstance(value, (ast.Name, ast.Attribute)):
                raise Unknown(f"self.{attr} may alias a module or parameter")

    def _plain_value(self, value: ast.AST) -> bool:
        """Arithmetic over self's plain attributes (self.d_k * 2) is fine; self's modules are not."""
        return all(not isinstance(s, ast.Call) for s in ast.walk(value))

    def _is_tensor_call(self, call: ast.Call) -> bool:
        func = call.func
        while isinstance(func, ast.Attribute):
            func = func.value
        return isinstance(func, ast.Name) and func.id in self.torch_names | {"math", "np", "numpy"} and \
            self._nn_callee(call.func) is None

    def _linear(self, attr: str, call: ast.Call, env: dict) -> None:
        kw = {k.arg: k.value for k in call.keywords}
        if None in kw:
            raise Unknown("nn.Linear(**...)")
        pos = list(call.args)
        if len(pos) > 3 or any(isinstance(p, ast.Starred) for p in pos):
            raise Unknown("nn.Linear with arguments it cannot follow")
        fields = dict(zip(("in_features", "out_features", "bias"), pos))
        for k in ("in_features", "out_features", "bias"):
            if k in kw:
                fields[k] = kw[k]
        n_in, n_out = self._eval(fields["in_features"], env), self._eval(fields["out_features"], env)
        bias = self._eval(fields["bias"], env) if "bias" in fields else True
        if not (isinstance(n_in, int) and isinstance(n_out, int)):
            raise Unknown("nn.Linear sizes that are not integers")
        self.params[f"{attr}.weight"] = (n_out, n_in)
        if bias:
            self.params[f"{attr}.bias"] = (n_out,)

    def _parameter(self, name: str, call: ast.AST, env: dict) -> None:
        if not (isinstance(call, ast.Call) and self._nn_callee(call.func) == "Parameter" and call.args):
            raise Unknown(f"{name} is not set by nn.Parameter(...)")
        inner, shape = call.args[0], None
        if isinstance(inner, ast.Call) and self._is_tensor_call(inner):
            fn = inner.func.attr if isinstance(inner.func, ast.Attribute) else ""
            if fn in TENSOR_FACTORIES:
                try:
                    dims = [self._eval(d, env) for d in inner.args]
                    if len(dims) == 1 and isinstance(dims[0], tuple):
                        dims = list(dims[0])
                    if all(isinstance(d, int) for d in dims):
                        shape = tuple(dims)
                except Unknown:
                    shape = None
        self.params[name] = shape

    # -- values -----------------------------------------------------------------------------------------------
    def _eval(self, node: ast.AST, env: dict):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, type(None))):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            raise Unknown(f"the value of {node.id}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == \
                getattr(self, "self_name", None):
            key = f"self.{node.attr}"
            if key in env:
                return env[key]
            raise Unknown(f"the value of {key}")
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            left, right = self._eval(node.left, env), self._eval(node.right, env)
            if isinstance(node.op, ast.Pow) and (not isinstance(right, int) or abs(right) > 64):
                raise Unknown("a power it will not compute")
            return self._bounded(_BIN[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp):
            value = self._eval(node.operand, env)
            if isinstance(node.op, ast.USub):
                return -value
            if isinstance(node.op, ast.Not):
                return not value
            if isinstance(node.op, ast.UAdd):
                return +value
        if isinstance(node, ast.BoolOp):
            values = [self._eval(v, env) for v in node.values]
            if isinstance(node.op, ast.And):
                return all(values) and values[-1]
            return next((v for v in values if v), values[-1])
        if isinstance(node, ast.Compare) and all(type(o) in _CMP for o in node.ops):
            left = self._eval(node.left, env)
            for op, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, env)
                if not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, env) else node.orelse, env)
        if isinstance(node, ast.Tuple):
            return tuple(self._eval(e, env) for e in node.elts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "bool") \
                and len(node.args) == 1 and not node.keywords:
            return self._bounded({"int": int, "bool": bool}[node.func.id](self._eval(node.args[0], env)))
        raise Unknown("a value it cannot compute")

    @staticmethod
    def _bounded(value):
        if isinstance(value, (int, float)) and abs(value) > MAX_VALUE:
            raise Unknown("a value out of range")
        return value
