"""The C target's segment writer: one planned `Segment` as a C function.

`_SegmentWriter(seg, ...).run()` lowers a segment's steps to the C function's body (fused
elementwise loops with their inline element functions, reductions, views, index scatters and
gathers, small matmuls) and gives its template context (`templates/c/kernels.c.jinja`). Also
here: the interleaving of a deep chain of math calls over LANES elements per call, and the
one exp shared by sigmoid(u) and sigmoid(-u). Moved verbatim out of `symgrad/emit/c.py`
(which re-exports every name); the emitter (`emit/c.py`) and the native scan loops
(`emit/c_scan.py`) use it.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import sympy

from ..ops import stable
from .c_loops import (C_TYPES, GENERIC, _at, _broadcast_strides, _cname, _contiguous,
                      _is_contiguous, _kept_strides, _loops, _nest, _reduced_strides, _size)
from .c_plan import _basic_view, _dims, _elementwise, _reads
from .render import c_comment, untrusted


@dataclass
class Val:
    """A value inside a C function: a pointer and how to index it (strides in elements)."""

    buf: str
    shape: tuple
    strides: tuple
    ctype: str


class _SegmentWriter:
    """Lowers one Segment to a C function (and the element functions of its fused loops)."""

    def __init__(self, seg, routine, shapes, dtypes, printer, kernel_base):
        self.seg, self.routine, self.shapes, self.dtypes = seg, routine, shapes, dtypes
        self.printer = printer
        self.ftype = printer.float_type
        self.ctype = {"float": self.ftype, **C_TYPES}
        self.vals = {}
        self.temps = []          # (C name, ctype, elements)
        self.body = []
        self.kernels = []        # template contexts of element functions
        self.kernel_base = kernel_base
        self.outputs = set(seg.outputs)
        for name in seg.inputs:
            # a generic segment's loader hands every operand in at the loop's full shape
            shape = GENERIC if seg.leaves is not None else tuple(shapes[name])
            self.vals[name] = Val(_cname(name), shape, _contiguous(shape),
                                  self.ctype[dtypes[name]])

    def lit(self, value):
        return self.printer._literal(value)

    # ---- storage
    def alloc(self, name, shape, ctype=None):
        """A new C-contiguous array for `name`: the caller's output array, or a temporary."""
        ctype = ctype or self.ctype[self.dtypes[name]]
        cn = _cname(name)
        if name not in self.outputs:
            self.temps.append((cn, ctype, _size(shape)))
        val = Val(cn, tuple(shape), _contiguous(shape), ctype)
        self.vals[name] = val
        return val

    def fill(self, dst, value):
        loops = _loops(dst.shape, [dst.strides], "i{}")
        return _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] = {value};"])

    def copy(self, dst, src):
        loops = _loops(src.shape, [dst.strides, src.strides], "i{}")
        return _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] = {src.buf}[{_at(loops, 1)}];"])

    def materialized(self, name, val):
        """val in C order (copied into a temporary when it is a strided view)."""
        if _is_contiguous(val):
            return val
        tmp = self.alloc(name + "_dense", val.shape, val.ctype)
        self.body += [f"/* {name}: a strided view, copied to C order */"] + self.copy(tmp, val)
        return tmp

    # ---- blocks
    def run(self):
        blocks = []
        for step in self.seg.steps:
            if not _elementwise(step):
                blocks.append(("op", step))
                continue
            shape = GENERIC if self.seg.leaves is not None else tuple(self.shapes[step.target])
            reads = set(_reads(step, self.routine))
            home = None
            for kind, item in reversed(blocks):
                if kind == "kernel":
                    if item["shape"] == shape:
                        home = item
                    break
                if item.target in reads:
                    break
            if home is not None:
                home["steps"].append(step)
            else:
                blocks.append(("kernel", {"shape": shape, "steps": [step]}))
        blocks = self._fuse_row_sums(blocks)
        needed_after = []
        later = set(self.seg.outputs)
        for kind, item in reversed(blocks):
            needed_after.append(set(later))
            for s in (item["steps"] if kind == "kernel" else [item]):
                later.update(_reads(s, self.routine))
        needed_after.reverse()
        for (kind, item), after in zip(blocks, needed_after):
            if kind == "kernel":
                self.kernel(item, after)
            else:
                self.op(item)
        for name in self.seg.outputs:
            val = self.vals[name]
            if val.buf != _cname(name) or not _is_contiguous(val):
                dst = Val(_cname(name), val.shape, _contiguous(val.shape), val.ctype)
                self.body += [f"/* {name}: a view above, copied to its output array */"]
                self.body += self.copy(dst, val)
        return self.context()

    def kernel_with_row_sums(self, kernel, shape, inputs, outputs, after, row_sums):
        """A fused loop over (rows, row) that also sums values along each row: the outer loops
        run over the kept dims, the inner (a SIMD reduction) along the summed ones."""
        name = kernel["name"]
        stored = [n for n in outputs if n in after]
        outs = {n: self.alloc(n, shape) for n in stored}
        operands = [self.vals[n] for n in inputs]
        dsts = [self.alloc(step.target, tuple(self.shapes[step.target]))
                for step, _, _, _ in row_sums]
        kept_strides = [_kept_strides(shape, dims) for _, _, _, dims in row_sums]
        strides = [outs[n].strides for n in stored] + \
            [_broadcast_strides(v, shape) for v in operands] + kept_strides
        loops = _loops(shape, strides, "i{}")
        first_sum = len(stored) + len(operands)
        outer = [lp for lp in loops if lp[2][first_sum]]
        inner = [lp for lp in loops if not lp[2][first_sum]]
        local = {n: f"r_{_cname(n)}" for n in outputs}
        args = [f"{v.buf}[{_at(loops, len(stored) + j)}]" for j, v in enumerate(operands)]
        args += [f"&{local[n]}" for n in outputs]
        t = self.ftype
        accs = [f"acc{k}" for k in range(len(row_sums))]
        body = [f"{self.ctype[self.dtypes[n]]} {local[n]};" for n in outputs]
        body.append(f"{name}_element({', '.join(args)});")
        body += [f"{outs[n].buf}[{_at(loops, j)}] = {local[n]};" for j, n in enumerate(stored)]
        for acc, (_, operand, _, _) in zip(accs, row_sums):
            value = local[operand] if t == "double" else f"(double){local[operand]}"
            body.append(f"{acc} += {value};")
        count = _size(lp[1] for lp in inner)
        finals = []
        for k, (acc, dst, (_, _, kind, _)) in enumerate(zip(accs, dsts, row_sums)):
            value = acc if kind == "sum" else f"{acc} / {count}.0"
            value = value if t == "double" else f"({t})({value})"
            finals.append(f"{dst.buf}[{_at(loops, first_sum + k)}] = {value};")
        row = [f"double {' = 0.0, '.join(accs)} = 0.0;"]
        row += _nest(inner, body, f"SYMGRAD_SIMD_WITH(reduction(+:{', '.join(accs)}))")
        row += finals
        sums = ", ".join(f"{step.target} = {kind} of {operand}"
                         for step, operand, kind, _ in row_sums)
        self.body.append(f"/* fused loop over {shape}: {kernel['computes']}; summed along each "
                         f"row as computed: {sums} */")
        if outer:
            self.body += _nest(outer, row, inner_pragma=None, threads_if=_size(shape))
        else:
            self.body += ["{"] + ["    " + line for line in row] + ["}"]

    def _row_sum(self, step):
        """(operand, kind, reduced dims) when `step` sums or averages an array over its
        trailing dims (sum, mean, sum_to); else None."""
        node = step.node
        if node.op not in ("sum", "mean", "sum_to") or id(node.args[0]) not in self.routine.names:
            return None
        name = self.routine.name_of(node.args[0])
        full = tuple(self.shapes[name])
        if node.op == "sum_to":
            like = tuple(node.args[1].shape)
            if len(like) != len(full):
                return None
            dims = tuple(i for i, n in enumerate(like) if n == 1 and full[i] != 1)
        else:
            dims = _dims(node, "dims", len(full))
        big = [d for d, n in enumerate(full) if n != 1]
        kept = [d for d in big if d not in dims]
        reduced = [d for d in big if d in dims]
        if not reduced or (kept and max(kept) > min(reduced)):
            return None
        return name, "mean" if node.op == "mean" else "sum", tuple(reduced)

    def _fuse_row_sums(self, blocks):
        """Move each row sum or mean of a fused loop's value into that loop: the loop then adds
        the values up as it computes them, and stores them only if something else reads them
        (layer norm's backward: three arrays and three passes fewer)."""
        defined_in, out = {}, []
        for kind, item in blocks:
            if kind == "kernel":
                item["row_sums"] = []
                for step in item["steps"]:
                    defined_in[step.target] = item
            else:
                found = self._row_sum(item)
                home = defined_in.get(found[0]) if found else None
                # one loop nest sums along one set of dims
                if home is not None and self.dtypes[found[0]] == "float" and \
                        tuple(self.shapes[found[0]]) == home["shape"] and \
                        all(r[3] == found[2] for r in home["row_sums"]):
                    home["row_sums"].append((item, *found))
                    continue
            out.append((kind, item))
        return out

    def kernel(self, item, after):
        steps, shape = item["steps"], item["shape"]
        name = f"{self.routine.name}_k{self.kernel_base + len(self.kernels)}"
        rename = {}
        inputs, defined = [], []
        for step in steps:
            for s in sorted(step.expr.free_symbols, key=str):
                if str(s) not in defined and str(s) not in inputs:
                    inputs.append(str(s))
                if _cname(str(s)) != str(s):
                    rename[s] = sympy.Symbol(_cname(str(s)), **s.assumptions0)
            defined.append(step.target)
        row_sums = item.get("row_sums", [])
        summed = {name for _, name, _, _ in row_sums}
        outputs = [t for t in defined if t in after or t in summed]
        statements = []
        exprs = [step.expr.xreplace(rename) if rename else step.expr for step in steps]
        taken = {_cname(n) for n in inputs + defined} | set(inputs + defined)
        exprs, shared = _share_sigmoid_exps(exprs, taken)
        for i, (step, expr) in enumerate(zip(steps, exprs)):
            for sym, value in shared.get(i, ()):
                what = ("e = exp(-|u|), shared by sigmoid(u) and sigmoid(-u)"
                        if isinstance(value, sympy.exp) else
                        "s = sigmoid(|u|); sigmoid(-|u|) = e*s")
                statements.append({"ctype": self.ftype, "name": str(sym), "expr": value,
                                   "code": self.printer.doprint(value), "comment": what})
            node = step.node
            comment = untrusted(f"from {node.site}") if node is not None and node.site else ""
            cn = _cname(step.target)
            statements.append({"ctype": self.ctype[self.dtypes[step.target]], "name": cn,
                               "expr": expr, "code": self.printer.doprint(expr),
                               "comment": comment})
            if step.target in outputs:
                statements.append({"ctype": None, "name": f"*out_{cn}", "code": cn,
                                   "comment": ""})
        params = [f"const {self.vals[n].ctype} {_cname(n)}" for n in inputs]
        params += [f"{self.ctype[self.dtypes[n]]} *restrict out_{_cname(n)}" for n in outputs]
        over = (f"the broadcast shape of {', '.join(self.seg.leaves)}"
                if shape == GENERIC else repr(shape))
        kernel = {"name": name, "shape": over,
                  "computes": ", ".join(s.target for s in steps),
                  "element_params": ", ".join(params) or "void",
                  "statements": statements, "lanes": None}
        self.kernels.append(kernel)
        if row_sums:
            self.kernel_with_row_sums(kernel, shape, inputs, outputs, after, row_sums)
            return
        outs = [self.alloc(n, shape) for n in outputs]
        operands = [self.vals[n] for n in inputs]
        strides = [o.strides for o in outs] + [_broadcast_strides(v, shape) for v in operands]
        loops = _loops(shape, strides, "i{}")

        def at(j, offset):
            if isinstance(offset, str):   # a generic loop's lane: every operand dense
                return _at(loops, j, offset)
            step = loops[-1][2][j] * offset if offset else 0
            return _at(loops, j, str(step) if step else "")

        def call(fn, offsets=(0,)):
            args = []
            for off in offsets:
                args += [f"{v.buf}[{at(len(outs) + j, off)}]" for j, v in enumerate(operands)]
                args += [f"&{o.buf}[{at(j, off)}]" for j, o in enumerate(outs)]
            return f"{fn}({', '.join(args)});"

        self.body.append(f"/* fused loop over {over}: {', '.join(s.target for s in steps)} */")
        lanes = 1
        if loops and (shape == GENERIC or loops[-1][1] >= LANES * INTERLEAVE_MIN_EXTENT) and \
                _call_depth(statements) >= INTERLEAVE_DEPTH:
            lanes = LANES
        if lanes == 1:
            self.body += _nest(loops, [call(f"{name}_element")], threads_if=_size(shape))
            return
        # latency-bound (a long chain of dependent math calls): LANES elements per call,
        # statement by statement, so the CPU overlaps their calls; the rest one at a time
        iname, n, st = loops[-1]
        kernel["lanes"] = _interleaved(statements, inputs, outputs, params, lanes, taken,
                                       self.printer)
        if shape == GENERIC:   # the lanes' length is known when it runs
            self.body.append(f"const int64_t part = {n} / {lanes};")
            part, offsets, start = "part", [0] + [f"{k}*part" if k > 1 else "part"
                                                  for k in range(1, lanes)], f"{lanes}*part"
        else:
            part = n // lanes
            offsets, start = [k * part for k in range(lanes)], part * lanes
        lane_call = call(f"{name}_x{lanes}", offsets)
        rest = [f"for (int64_t {iname} = {start}; {iname} < {n}; {iname}++) "
                + call(f"{name}_element")]
        main = [(iname, part, st)]
        if len(loops) == 1:
            self.body += _nest(main, [lane_call], threads_if=_size(shape)) + rest
        else:
            inner = _nest(main, [lane_call]) + rest
            self.body += _nest(loops[:-1], inner, inner_pragma=None, threads_if=_size(shape))

    def op(self, step):
        node, target = step.node, step.target
        args = [self.vals.get(self.routine.name_of(a)) if id(a) in self.routine.names else None
                for a in node.args]
        shape = tuple(node.shape)
        # pasted into C comments of the body: the user's path escaped here
        what = f"{target} = {node.op}" + (f", from {c_comment(node.site)}" if node.site else "")
        op = node.op
        if op in ("sum", "mean", "amax", "amin"):
            x = args[0]
            self.reduce(what, op, x, _dims(node, "dims", len(x.shape)), target, shape)
        elif op in ("max_dim", "min_dim", "argmax", "argmin"):
            x = args[0]
            kind = {"max_dim": "amax", "min_dim": "amin"}.get(op, op)
            self.reduce(what, kind, x, _dims(node, "dim", len(x.shape)), target, shape)
        elif op == "sum_to":
            x = args[0]
            like = tuple(node.args[1].shape)
            if x.shape == like:
                self.vals[target] = x
                self.body.append(f"/* {what}: already of shape {like} (no copy) */")
                return
            lead = len(x.shape) - len(like)
            dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(like)
                                              if n == 1 and x.shape[lead + i] != 1)
            self.reduce(what, "sum", x, dims, target, shape)
        elif op == "unreduce":
            g = args[0]
            dims = _dims(node, "dims", len(shape))
            if node.attr("mean"):
                count = _size(shape[d] for d in dims) if shape else 1
                scaled = self.alloc(target + "_mean", g.shape, g.ctype)
                loops = _loops(g.shape, [scaled.strides, g.strides], "i{}")
                self.body.append(f"/* {what}: the mean's 1/{count}, then a view */")
                self.body += _nest(loops, [f"{scaled.buf}[{_at(loops, 0)}] = "
                                           f"{g.buf}[{_at(loops, 1)}] / {self.lit(count)};"])
                g = scaled
            else:
                self.body.append(f"/* {what}: a broadcast view of {self.routine.name_of(node.args[0])} */")
            strides = _reduced_strides(g, shape, dims, node.attr("keepdim") or not shape)
            self.vals[target] = Val(g.buf, shape, strides, g.ctype)
        elif op in ("broadcast_like", "expand"):
            g = args[0]
            self.body.append(f"/* {what}: a broadcast view */")
            self.vals[target] = Val(g.buf, shape, _broadcast_strides(g, shape), g.ctype)
        elif op == "permute":
            x = args[0]
            dims = node.attr("dims")
            dims = tuple(reversed(range(len(x.shape)))) if dims is None else \
                tuple(d % len(x.shape) for d in dims)
            self.body.append(f"/* {what}: a strided view */")
            self.vals[target] = Val(x.buf, shape, tuple(x.strides[d] for d in dims), x.ctype)
        elif op in ("reshape", "reshape_like", "stop_gradient"):
            x = self.materialized(target, args[0]) if op != "stop_gradient" else args[0]
            self.body.append(f"/* {what}: the same array */")
            self.vals[target] = Val(x.buf, shape, _contiguous(shape), x.ctype) \
                if op != "stop_gradient" else x
        elif op == "zeros_like":
            dst = self.alloc(target, shape)
            self.body += [f"/* {what} */"] + self.fill(dst, "0")
        elif op == "getitem":         # ints and slices (_basic_view): a strided view
            x = self.materialized(target, args[0])
            offset, kept = _basic_view(node.attr("index"), x.shape)
            self.body.append(f"/* {what}: a strided view */")
            self.vals[target] = Val(f"({x.buf} + {offset})" if offset else x.buf, shape,
                                    tuple(x.strides[d] * step for d, step in kept), x.ctype)
        elif op == "index_put_zeros":  # the adjoint of that: zeros, g in the view
            g = args[0]
            offset, kept = _basic_view(node.attr("index"), shape)
            dst = self.alloc(target, shape)
            self.body += [f"/* {what}: zeros with {self.routine.name_of(node.args[0])} in a "
                          "strided view */"] + self.fill(dst, "0")
            view = Val(f"({dst.buf} + {offset})" if offset else dst.buf, g.shape,
                       tuple(dst.strides[d] * step for d, step in kept), dst.ctype)
            self.body += self.copy(view, g)
        elif op == "scan_part":       # sg.scan's packed result: a part is a slice of it
            x = self.materialized(target, args[0])
            o = node.attr("offset")
            self.body.append(f"/* {what}: elements {o}.. of the loop's result */")
            self.vals[target] = Val(f"({x.buf} + {o})" if o else x.buf, shape,
                                    _contiguous(shape), x.ctype)
        elif op == "scan_part_back":  # its adjoint: zeros but for that slice
            g, o = args[0], node.attr("offset")
            dst = self.alloc(target, shape)
            self.body += [f"/* {what}: zeros, {self.routine.name_of(node.args[0])} at {o}.. */"]
            self.body += self.fill(dst, "0")
            part = Val(f"({dst.buf} + {o})" if o else dst.buf, g.shape, _contiguous(g.shape),
                       dst.ctype)
            self.body += self.copy(part, g)
        elif op == "index_back":
            g, idx = args[0], args[1]
            dim = node.attr("dim") % max(len(shape), 1)
            keep = node.attr("keepdim")
            dst = self.alloc(target, shape)
            gs = _reduced_strides(g, shape, (dim,), keep) if shape else (0,) * len(shape)
            xs = _reduced_strides(idx, shape, (dim,), keep) if shape else ()
            kept = tuple(1 if d == dim else n for d, n in enumerate(shape))
            loops = _loops(kept, [dst.strides, gs, xs], "i{}")
            place = f"{idx.buf}[{_at(loops, 2)}]*{dst.strides[dim]}" if shape else ""
            self.body += [f"/* {what}: zeros with {self.routine.name_of(node.args[0])} "
                          f"at the indices */"] + self.fill(dst, "0")
            self.body += _nest(loops, [f"{dst.buf}[{_at(loops, 0, place)}] = "
                                       f"{g.buf}[{_at(loops, 1)}];"], inner_pragma=None)
        elif op == "take_dim":
            u, idx = args
            if not u.shape:
                self.body.append(f"/* {what}: a 0-d value is its own pick */")
                self.vals[target] = u
                return
            dim = node.attr("dim") % max(len(u.shape), 1)
            keep = node.attr("keepdim")
            dst = self.alloc(target, shape)
            full = u.shape
            kept = tuple(1 if d == dim else n for d, n in enumerate(full))
            ds = _reduced_strides(dst, full, (dim,), keep)
            xs = _reduced_strides(idx, full, (dim,), keep)
            loops = _loops(kept, [ds, u.strides, xs], "i{}")
            place = f"{idx.buf}[{_at(loops, 2)}]*{u.strides[dim]}"
            self.body.append(f"/* {what}: values at the indices */")
            self.body += _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] = "
                                       f"{u.buf}[{_at(loops, 1, place)}];"], inner_pragma=None)
        elif op in ("matmul", "matmul_grad_a", "matmul_grad_b"):
            if op == "matmul":
                a, b = args
            elif op == "matmul_grad_a":      # g @ b^T
                g, _, b = args
                a, b = g, Val(b.buf, b.shape[::-1], b.strides[::-1], b.ctype)
            else:                             # a^T @ g
                g, a, _ = args
                a, b = Val(a.buf, a.shape[::-1], a.strides[::-1], a.ctype), g
            self.matmul(what, a, b, self.alloc(target, shape))
        else:  # pragma: no cover - _c_able admits only the ops above
            raise AssertionError(op)

    def reduce(self, what, kind, x, dims, target, shape):
        """sum / mean / amax / amin / argmax / argmin of x over dims into a new array."""
        dst = self.alloc(target, shape)
        full = x.shape
        ost = _kept_strides(full, dims)
        inner = max((d for d, n in enumerate(full) if n != 1), default=None)
        t, f = x.ctype, self.ftype
        self.body.append(f"/* {what} */")
        if kind in ("sum", "mean") and inner is not None and inner not in dims:
            # columns: the innermost dim is kept, so the inner loop adds whole rows (in the
            # array's type, as NumPy does along a non-contiguous axis)
            self.body += self.fill(dst, "0")
            loops = _loops(full, [ost, x.strides], "i{}")
            self.body += _nest(loops, [f"{dst.buf}[{_at(loops, 0)}] += "
                                       f"{x.buf}[{_at(loops, 1)}];"])
            if kind == "mean":
                count = self.lit(_size(full[d] for d in dims))
                self.body += [f"for (int64_t i0 = 0; i0 < {_size(shape)}; i0++) "
                              f"{dst.buf}[i0] = {dst.buf}[i0] / {count};"]
            return
        # rows: one accumulator per output element, the reduced dims innermost
        out_loops = _loops([1 if d in dims else n for d, n in enumerate(full)],
                           [ost, x.strides], "i{}")
        red_loops = _loops([n if d in dims else 1 for d, n in enumerate(full)],
                           [x.strides], "k{}")
        o = _at(out_loops, 0)
        base = _at(out_loops, 1)
        src = f"{x.buf}[{_at(red_loops, 0, '' if base == '0' else base)}]"
        if kind in ("sum", "mean"):
            read = src if t == "double" else f"(double){src}"
            count = _size(full[d] for d in dims)
            final = "acc" if kind == "sum" else f"acc / {count}.0"
            final = final if t == "double" else f"({t})({final})"
            body = ["double acc = 0.0;"]
            body += _nest(red_loops, [f"acc += {read};"], "SYMGRAD_SIMD_WITH(reduction(+:acc))")
            body.append(f"{dst.buf}[{o}] = {final};")
        else:
            big = "INFINITY" if kind in ("amin", "argmin") else "-INFINITY"
            cmp = "<" if kind in ("amin", "argmin") else ">"
            red = "min" if kind in ("amin", "argmin") else "max"
            body = [f"{t} best = {big};", "int seen_nan = 0;"]
            body += _nest(red_loops, [f"const {t} val = {src};",
                                      f"best = val {cmp} best ? val : best;",
                                      "seen_nan |= val != val;"],
                          f"SYMGRAD_SIMD_WITH(reduction({red}:best) reduction(|:seen_nan))")
            if kind in ("amax", "amin"):
                body.append(f"{dst.buf}[{o}] = seen_nan ? NAN : best;")
            else:
                # the first index holding the extreme (or the first NaN), as numpy.argmax
                (k, n, st), = red_loops or [("k0", 1, [0])]
                at = f"{x.buf}[{k}*{st[0]}{'' if base == '0' else ' + ' + base}]"
                body += ["int64_t at = 0;",
                         f"for (int64_t {k} = 0; {k} < {n}; {k}++) {{",
                         f"    const {t} val = {at};",
                         f"    if (seen_nan ? val != val : val == best) {{ at = {k}; break; }}",
                         "}", f"{dst.buf}[{o}] = at;"]
        self.body += _nest(out_loops, body, inner_pragma=None) if out_loops else \
            ["{"] + ["    " + b for b in body] + ["}"]

    def matmul(self, what, a, b, dst):
        """dst (M, N) = a (M, K) @ b (K, N), operands read through their strides."""
        (m, k), n = a.shape, b.shape[1]
        t = a.ctype
        A = lambda i, kk: f"{a.buf}[{_idx([(i, a.strides[0]), (kk, a.strides[1])])}]"  # noqa: E731
        B = lambda kk, j: f"{b.buf}[{_idx([(kk, b.strides[0]), (j, b.strides[1])])}]"  # noqa: E731
        self.body.append(f"/* {what}: ({m}, {k}) @ ({k}, {n}) */")
        if n >= 8 and b.strides[1] == 1:
            # rows of b scaled and added: the inner loop runs along contiguous rows
            row = f"{dst.buf}[{_idx([('i0', n), ('i1', 1)])}]"
            self.body += [
                f"for (int64_t i0 = 0; i0 < {m}; i0++) {{",
                "    SYMGRAD_SIMD",
                f"    for (int64_t i1 = 0; i1 < {n}; i1++) {row} = 0;",
                f"    for (int64_t k0 = 0; k0 < {k}; k0++) {{",
                f"        const {t} acc = {A('i0', 'k0')};",
                "        SYMGRAD_SIMD",
                f"        for (int64_t i1 = 0; i1 < {n}; i1++) {row} += acc*{B('k0', 'i1')};",
                "    }", "}"]
        else:
            # dot products of rows of a with columns of b
            self.body += [
                f"for (int64_t i0 = 0; i0 < {m}; i0++) {{",
                f"    for (int64_t i1 = 0; i1 < {n}; i1++) {{",
                f"        {t} acc = 0;",
                "        SYMGRAD_SIMD_WITH(reduction(+:acc))",
                f"        for (int64_t k0 = 0; k0 < {k}; k0++) acc += {A('i0', 'k0')}*{B('k0', 'i1')};",
                f"        {dst.buf}[{_idx([('i0', n), ('i1', 1)])}] = acc;",
                "    }", "}"]

    def context(self):
        seg = self.seg
        params = [f"const {self.vals[n].ctype if n in self.vals else self.ctype[self.dtypes[n]]} "
                  f"*restrict {_cname(n)}" for n in seg.inputs]
        params += [f"{self.ctype[self.dtypes[n]]} *restrict {_cname(n)}" for n in seg.outputs]
        head, scratch = [], 0
        if self.temps:
            offsets = []
            for cn, ctype, count in self.temps:
                offsets.append(scratch)
                scratch += -(-count * (4 if ctype == "float" else 8 if ctype in ("double", "int64_t")
                                       else 1) // 64) * 64
            params.insert(0, "char *restrict scratch")
            names = ", ".join(cn for cn, _, _ in self.temps)
            head.append(f"/* temporaries in the caller's {scratch} bytes of scratch: {names} */")
            for (cn, ctype, _), off in zip(self.temps, offsets):
                head.append(f"{ctype} *const {cn} = ({ctype} *)(scratch + {off});")
        if seg.leaves is not None:
            params.append(f"const int64_t {GENERIC[0]}")
        return {"name": seg.name, "params": ", ".join(params) or "void",
                "steps": ", ".join(s.target for s in seg.steps),
                "body": head + self.body, "scratch": scratch,
                "kernels": self.kernels}


# Interleaving: a fused loop whose element function is a chain of at least INTERLEAVE_DEPTH
# dependent math calls (libmvec calls are latency-bound: each waits for the previous) runs LANES
# elements per call, statement by statement, so the CPU overlaps independent calls. Measured on
# the 30-deep tanh/sin chain (float32, 1e5, AVX2): 1 lane 6.3 ms, 2 lanes 4.1 ms, 3 lanes 3.6 ms,
# 4 lanes 3.6 ms.
LANES = 3
INTERLEAVE_DEPTH = 6
INTERLEAVE_MIN_EXTENT = 16   # elements per lane below which the plain loop is kept
_CHEAP = (sympy.Abs, sympy.sign, sympy.Max, sympy.Min, sympy.Piecewise, sympy.floor,
          sympy.ceiling, sympy.Heaviside)


def _is_call(e):
    """Whether `e` is printed as a math call: any function but a select, abs, sign, floor or
    ceiling; or a non-integer power other than sqrt."""
    if isinstance(e, sympy.Function):
        return not isinstance(e, _CHEAP)
    return e.is_Pow and not e.exp.is_Integer and abs(e.exp) != sympy.S.Half


def _call_depth(statements):
    """The longest chain of dependent math calls through the statements of an element
    function."""
    depth = {}

    @functools.lru_cache(maxsize=None)
    def walk(e):     # memoized: a subexpression shared within a formula is walked once
        if e.is_Symbol:
            return depth.get(str(e), 0)
        return max((walk(a) for a in e.args), default=0) + _is_call(e)

    for s in statements:
        if s["ctype"]:
            depth[s["name"]] = walk(s["expr"])
    return max(depth.values(), default=0)


def _interleaved(statements, inputs, outputs, params, lanes, taken, printer):
    """The element function on `lanes` elements at once: its parameters and statements.

    Each math call gets its own statement (so one nested formula is several), and each
    statement is repeated for every lane with its variables suffixed: consecutive calls are
    independent, and the CPU runs them side by side.
    """
    taken = set(taken)
    flat = []
    for s in statements:
        if not s["ctype"]:
            flat.append(s)
            continue
        calls = []

        def split(e):
            if e.is_Atom:
                return e
            if _is_call(e) and printer.doprint(e).startswith("symgrad_"):
                args = e.args    # an inline function of a pattern (tanh(softplus(u)), ...)
            else:
                args = [split(a) for a in e.args]
            e = e.func(*args) if e.args else e
            if _is_call(e):
                name = f"{s['name']}_c{len(calls)}"
                while name in taken:
                    name += "_"
                taken.add(name)
                sym = sympy.Symbol(name, real=True)
                calls.append((sym, e))
                return sym
            return e

        expr = split(s["expr"])
        if calls and expr == calls[-1][0]:
            expr = calls.pop()[1]
        flat += [{"ctype": s["ctype"], "name": str(sym), "code": printer.doprint(e)}
                 for sym, e in calls]
        flat.append({"ctype": s["ctype"], "name": s["name"], "code": printer.doprint(expr)})
    local = [_cname(n) for n in inputs] + [f"out_{_cname(n)}" for n in outputs]
    local += [s["name"] for s in flat if s["ctype"]]
    taken |= set(local)
    base = "_l"
    while any(f"{v}{base}{k}" in taken for v in local for k in range(lanes)):
        base = "_" + base
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, local), key=len, reverse=True))
                      + r")\b(?!\s*\()")

    def on(text, k):
        return word.sub(lambda m: f"{m.group(1)}{base}{k}", text)

    return {"count": lanes,
            "params": ", ".join(on(p, k) for k in range(lanes) for p in params),
            "statements": [{"ctype": s["ctype"], "name": on(s["name"], k),
                            "code": on(s["code"], k)}
                           for s in flat for k in range(lanes)]}


def _idx(terms):
    out = []
    for name, stride in terms:
        if stride == 1:
            out.append(name)
        elif stride:
            out.append(f"{name}*{stride}")
    return " + ".join(out) or "0"


def _share_sigmoid_exps(exprs, taken):
    """One exp and one division for sigmoid(u) and sigmoid(-u) in one element function.

    swish's and gelu_tanh's derivatives hold both. With e = exp(-|u|) and s = 1/(1 + e):
    the sigmoid of the non-negative one of u, -u is s, the other's is e*s (selected on
    u >= 0). exp never overflows, so the small side keeps its subnormal values (and x*sigmoid(x)
    its normal ones: swish(-89) = -2e-37 in float) where 1/(1 + exp(89)) is 0; NaN stays NaN.
    e*s adds half an ulp to the two roundings of s. Returns the rewritten
    expressions and {index: [(symbol, expression)]}, the temporaries to define before the
    expression at that index.
    """
    first, signs = {}, {}
    for i, expr in enumerate(exprs):
        for f in sorted(expr.atoms(stable.sigmoid), key=sympy.default_sort_key):
            u = f.args[0]
            neg = u.could_extract_minus_sign()
            key = -u if neg else u
            first.setdefault(key, i)
            signs.setdefault(key, set()).add(neg)
    pairs = [k for k in sorted(first, key=sympy.default_sort_key) if len(signs[k]) == 2]
    if not pairs:
        return exprs, {}

    def fresh(stem):
        name = stem
        while name in taken:
            name += "_"
        taken.add(name)
        return sympy.Symbol(name, real=True)

    subs, at = {}, {}
    for n, key in enumerate(pairs):
        e, s = fresh(f"e{n}"), fresh(f"s{n}")
        up = sympy.GreaterThan(key, 0, evaluate=False)
        subs[stable.sigmoid(key)] = sympy.Piecewise((s, up), (e * s, True))
        subs[stable.sigmoid(-key)] = sympy.Piecewise((e * s, up), (s, True))
        at.setdefault(first[key], []).extend([(e, sympy.exp(-sympy.Abs(key))), (s, 1 / (1 + e))])
    return [x.xreplace(subs) for x in exprs], at
