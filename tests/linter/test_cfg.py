"""The control-flow graph and its dominance facts, on real libcst trees."""

from __future__ import annotations

import textwrap

import libcst as cst

from swacheck.analysis.cfg import CFG, FALSE, TRUE, build_cfg


def _cfg(source: str) -> tuple[CFG, cst.Module]:
    module = cst.parse_module(textwrap.dedent(source))
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    return build_cfg(function), module


def _nodes(cfg: CFG, module: cst.Module, text: str) -> list[int]:
    """Ids of the nodes whose statement's first line is ``text``."""
    out = []
    for node in cfg.nodes:
        if node.stmt is not None:
            code = module.code_for_node(node.stmt).strip().splitlines()[0]
            if code == text:
                out.append(node.id)
    assert out, f"no node for {text!r}"
    return out


def _node(cfg: CFG, module: cst.Module, text: str) -> int:
    (only,) = _nodes(cfg, module, text)
    return only


def test_if_else_branches_and_dominance() -> None:
    cfg, m = _cfg(
        """
        def f(x):
            a()
            if x:
                b()
            else:
                c()
            d()
        """
    )
    test, b, c, d = (_node(cfg, m, t) for t in ("if x:", "b()", "c()", "d()"))
    assert cfg.nodes[test].labels == {b: TRUE, c: FALSE}
    assert cfg.dominates(test, d) and not cfg.dominates(b, d)
    assert cfg.post_dominates(d, b) and cfg.post_dominates(d, c)
    assert not cfg.post_dominates(b, test)


def test_early_return_goes_to_exit() -> None:
    cfg, m = _cfg(
        """
        def f(x):
            if x:
                return 1
            g()
            return 2
        """
    )
    ret1, g = _node(cfg, m, "return 1"), _node(cfg, m, "g()")
    assert cfg.nodes[ret1].succs == [cfg.exit]
    assert not cfg.post_dominates(g, _node(cfg, m, "if x:"))
    assert cfg.ipdom()[_node(cfg, m, "if x:")] == cfg.exit


def test_loop_back_edge_break_continue_and_else() -> None:
    cfg, m = _cfg(
        """
        def f(xs):
            for x in xs:
                if x:
                    break
                if not x:
                    continue
                g(x)
            else:
                h()
            k()
        """
    )
    header = _node(cfg, m, "for x in xs:")
    brk, cont, g, h, k = (_node(cfg, m, t) for t in ("break", "continue", "g(x)", "h()", "k()"))
    assert header in cfg.nodes[g].succs  # back edge
    assert cfg.nodes[cont].succs == [header]
    assert cfg.nodes[brk].succs == [k]  # break skips the else clause
    assert cfg.nodes[header].labels[h] == FALSE
    assert cfg.dominates(header, g)
    assert cfg.post_dominates(k, h)


def test_while_true_exits_only_by_break() -> None:
    cfg, m = _cfg(
        """
        def f():
            while True:
                g()
                if done():
                    break
            h()
        """
    )
    header = _node(cfg, m, "while True:")
    assert cfg.nodes[header].succs == [_node(cfg, m, "g()")]
    assert cfg.dominates(_node(cfg, m, "g()"), _node(cfg, m, "h()"))


def test_finally_runs_on_every_exit() -> None:
    cfg, m = _cfg(
        """
        def f(x):
            for y in x:
                try:
                    if y:
                        return 1
                    if not y:
                        continue
                    if y is None:
                        break
                    if y == 2:
                        raise ValueError
                finally:
                    cleanup()
            after()
        """
    )
    copies = _nodes(cfg, m, "cleanup()")
    # one copy per way out: fall-through, return, raise, break, continue
    assert len(copies) == 5
    exits = {succ for copy in copies for succ in cfg.nodes[copy].succs}
    header = _node(cfg, m, "for y in x:")
    assert {cfg.exit, cfg.raise_exit, header, _node(cfg, m, "after()")} <= exits
    ret = _node(cfg, m, "return 1")
    assert cfg.nodes[ret].succs[0] in copies
    # the copy after ``return`` leads only to the exit: no infeasible path to after()
    ret_copy = cfg.nodes[ret].succs[0]
    assert cfg.nodes[ret_copy].succs == [cfg.exit]


def test_try_except_exceptional_edges() -> None:
    cfg, m = _cfg(
        """
        def f():
            try:
                a()
                b()
            except KeyError:
                h()
            else:
                e()
            z()
        """
    )
    a, b, h, e = (_node(cfg, m, t) for t in ("a()", "b()", "h()", "e()"))
    handler = next(n.id for n in cfg.nodes if n.kind == "handler")
    assert handler in cfg.nodes[a].exc_succs and handler in cfg.nodes[b].exc_succs
    assert handler not in cfg.nodes[e].exc_succs  # else is outside the try body
    assert cfg.nodes[handler].succs == [h]
    # post-dominance ignores exceptions: z() post-dominates a()
    assert cfg.post_dominates(_node(cfg, m, "z()"), a)
    # but the handler is not dominated by b (a() may raise first)
    assert not cfg.dominates(b, handler)


def test_with_and_nested_function_kept_separate() -> None:
    cfg, m = _cfg(
        """
        def f():
            with torch.cuda.graph(g):
                out = run()
            def inner():
                return leaked()
            return out
        """
    )
    with_node = _node(cfg, m, "with torch.cuda.graph(g):")
    assert cfg.nodes[with_node].succs == [_node(cfg, m, "out = run()")]
    assert not _nodes_safe(cfg, m, "return leaked()")


def _nodes_safe(cfg: CFG, module: cst.Module, text: str) -> list[int]:
    try:
        return _nodes(cfg, module, text)
    except AssertionError:
        return []


def test_match_statement() -> None:
    cfg, m = _cfg(
        """
        def f(x):
            match x:
                case 1:
                    a()
                case _:
                    b()
            c()
        """
    )
    c = _node(cfg, m, "c()")
    assert cfg.post_dominates(c, _node(cfg, m, "a()"))
    subject = _node(cfg, m, "match x:")
    assert cfg.exit not in cfg.nodes[subject].succs
