"""What a FLA release's ``parallel_nsa_bwd`` launches, read from its source with :mod:`ast` (nothing executed).

The release arm times a FLA release or source tree that is *not* the pinned commit, so the
launch facts the pinned experiment states in docs/METHOD.md must be read again, from that release's
own ``fla/ops/nsa/parallel.py``. :func:`read_launches` parses it (never imports or runs it) and returns:

- ``assignments``: every top-level assignment of the wrapper, in order (``BV = max(...)``, ``grid = ...``),
  as source text;
- ``launches``: every ``kernel[grid](...)`` the wrapper makes, and those of the helpers it calls
  (``parallel_attn_bwd_preprocess``, ``prepare_block_csr``, 0.5.1's ``parallel_nsa_block_mask``), each
  with its grid expression (a ``grid`` name resolved to the assignment before the call), keyword
  arguments and line; helpers imported from other modules are followed through the ``from X import``
  chain (re-exports included) to the file that defines them;
- ``kernels``: per launched kernel, its decorators as read: ``triton.autotune`` key and config-space
  expression, ``prune_configs_by``, ``triton.heuristics`` keys, ``triton.jit`` keywords, and its
  parameter names;
- ``files``: every file read, with its sha256 (``validate`` checks them against the imported files).

>>> src = '''
... def helper(x):
...     k2[(x.numel(),)](x=x)
... @triton.autotune(configs=[], key=['BS', 'G'])
... @triton.jit
... def k1(q, BS: tl.constexpr):
...     pass
... def parallel_nsa_bwd(q, T):
...     BS = 64
...     grid = (T, 1)
...     k1[grid](q=q, BS=BS)
...     helper(q)
... '''
>>> facts = read_module_launches(src, "m.py")
>>> [(l["kernel"], l["grid"], l["via"]) for l in facts["launches"]]
[('k1', '(T, 1)', 'parallel_nsa_bwd'), ('k2', '(x.numel(),)', 'helper')]
>>> facts["kernels"]["k1"]["autotune_key"]
['BS', 'G']
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any

from ..errors import UserError

WRAPPER = "parallel_nsa_bwd"
NSA_FILE = "fla/ops/nsa/parallel.py"
MAX_REEXPORT_HOPS = 3  # re-export hops followed from an import to the defining file


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _imports(tree: ast.Module, package: str) -> dict[str, tuple[str, str]]:
    """``{local name: (absolute module, imported name)}`` of every top-level ``from X import Y``."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the package of the importing module
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                out[alias.asname or alias.name] = (base, alias.name)
    return out


def _text(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _literal(node: ast.AST | None) -> Any:
    """A literal's value (an autotune ``key`` list), else its source text."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _kernel_facts(fn: ast.FunctionDef) -> dict[str, Any]:
    """A ``@triton.jit`` kernel's decorators as read: autotune key/configs/pruning, heuristics, jit keywords."""
    facts: dict[str, Any] = {"line": fn.lineno, "params": [a.arg for a in fn.args.args],
                             "constexpr": [a.arg for a in fn.args.args if a.annotation is not None
                                           and ast.unparse(a.annotation).endswith("constexpr")],
                             "autotune_key": None, "autotune_configs": None, "prune_configs_by": None,
                             "heuristics": [], "jit": None}
    for dec in fn.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        name = ast.unparse(call.func if call else dec)
        kwargs = {k.arg: k.value for k in call.keywords if k.arg} if call else {}
        if name.endswith("autotune"):
            facts["autotune_key"] = _literal(kwargs.get("key"))
            facts["autotune_configs"] = _text(kwargs.get("configs"))
            facts["prune_configs_by"] = _text(kwargs.get("prune_configs_by"))
        elif name.endswith("heuristics") and call and call.args and isinstance(call.args[0], ast.Dict):
            facts["heuristics"] = [ast.literal_eval(k) for k in call.args[0].keys if k is not None]
        elif name.endswith("jit"):
            facts["jit"] = {k: ast.unparse(v) for k, v in kwargs.items()}
    return facts


def _launches(fn: ast.FunctionDef) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
    """``(launches, called names, assignments)`` of one function body, in source order."""
    assigns: list[dict[str, Any]] = []
    for node in fn.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigns.append({"target": ", ".join(ast.unparse(t) for t in targets), "value": ast.unparse(node.value),
                            "line": node.lineno})
    launches, called = [], []
    for call in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name):
            grid = ast.unparse(call.func.slice)
            if isinstance(call.func.slice, ast.Name):  # kernel[grid](...): the assignment before the call
                earlier = [a for a in assigns if a["target"] == grid and a["line"] < call.lineno]
                grid = earlier[-1]["value"] if earlier else grid
            launches.append({"kernel": call.func.value.id, "grid": grid, "line": call.lineno, "via": fn.name,
                             "args": {k.arg if k.arg else "**": ast.unparse(k.value) for k in call.keywords}})
        elif isinstance(call.func, ast.Name):
            called.append(call.func.id)
    return launches, called, assigns


class _Reader:
    """Parses files under one package root on demand (each once), recording what it read."""

    def __init__(self, root: Path):
        self.root = root
        self.files: dict[str, str] = {}         # relative path -> sha256
        self.trees: dict[str, ast.Module] = {}

    def module(self, dotted: str) -> tuple[ast.Module, str] | None:
        rel = dotted.replace(".", "/")
        for cand in (f"{rel}.py", f"{rel}/__init__.py"):
            if (self.root / cand).is_file():
                if cand not in self.trees:
                    data = (self.root / cand).read_bytes()
                    self.files[cand] = sha256_bytes(data)
                    try:
                        self.trees[cand] = ast.parse(data, filename=cand)
                    except SyntaxError as exc:
                        raise UserError(f"{self.root / cand}: not Python source ({exc.msg}, line "
                                        f"{exc.lineno})") from None
                package = dotted if cand.endswith("__init__.py") else dotted.rpartition(".")[0]
                return self.trees[cand], package
        return None

    def definition(self, dotted: str, name: str, depth: int = 0) -> tuple[ast.FunctionDef, str] | None:
        """The ``def name`` that ``from dotted import name`` reaches (following re-exports)."""
        found = self.module(dotted)
        if found is None or depth > MAX_REEXPORT_HOPS:
            return None
        tree, package = found
        fn = _functions(tree).get(name)
        if fn is not None:
            return fn, dotted
        imported = _imports(tree, package).get(name)
        return self.definition(*imported, depth + 1) if imported else None


def read_module_launches(text: str, filename: str, reader: _Reader | None = None,
                         module: str = "fla.ops.nsa.parallel") -> dict[str, Any]:
    """The launch facts of ``WRAPPER`` in one module's source ``text`` (see the module docstring);
    ``reader`` follows helpers into other files of the same package root (without it: same file only)."""
    return _facts(ast.parse(text, filename=filename), filename, reader, module)


def _facts(tree: ast.Module, filename: str, reader: _Reader | None, module: str) -> dict[str, Any]:
    funcs = _functions(tree)
    if WRAPPER not in funcs:
        raise UserError(f"{filename}: defines no {WRAPPER}; not an FLA NSA module this arm can time")
    imports = _imports(tree, module.rpartition(".")[0])
    launches, called, assigns = _launches(funcs[WRAPPER])
    kernels: dict[str, Any] = {}
    helpers: dict[str, str] = {}
    defs = {n: (f, module) for n, f in funcs.items()}
    for name in called:  # one level: the helpers the wrapper calls (their own launches)
        if name in helpers:
            continue
        if name in funcs:
            fn, where = funcs[name], module
        elif reader is not None and name in imports and (hit := reader.definition(*imports[name])) is not None:
            fn, where = hit
            found = reader.module(where)
            defs.update({n: (f, where) for n, f in _functions(found[0]).items()} if found else {})
        else:
            continue
        sub, _, _ = _launches(fn)
        if sub:
            helpers[name] = where
            launches += sub
    for launch in launches:
        hit = defs.get(launch["kernel"])
        if hit is not None and launch["kernel"] not in kernels:
            kernels[launch["kernel"]] = {"module": hit[1], **_kernel_facts(hit[0])}
    return {"wrapper": WRAPPER, "module": module, "line": funcs[WRAPPER].lineno, "assignments": assigns,
            "launches": launches, "helpers": helpers, "kernels": kernels}


def read_launches(root: str | Path) -> dict[str, Any]:
    """:func:`read_module_launches` of ``<root>/fla/ops/nsa/parallel.py`` (``root``: the folder holding ``fla/``),
    following helpers into the other files of that tree; adds ``files`` (relative path -> sha256).

    Raises :class:`UserError` when the file is missing or is not Python source."""
    root = Path(root)
    reader = _Reader(root)
    found = reader.module("fla.ops.nsa.parallel") if (root / NSA_FILE).is_file() else None
    if found is None:
        raise UserError(f"{root}: has no {NSA_FILE}; point at the folder that holds the fla/ package")
    facts = _facts(found[0], NSA_FILE, reader, "fla.ops.nsa.parallel")
    return {**facts, "files": dict(sorted(reader.files.items()))}
