"""The option table walked from Python: every option is a keyword of dsc.Loader with the name of the
dsc program's flag (snake_case for kebab-case), sets what the flag sets, and a refused value gives the
reason the dsc program gives (tests/option_table_test.cc walks the C++ side)."""
import subprocess

import pytest

import dsc
from dsc import _dsc


def python_value(row, text):
    """The table's text as the Python value a user passes, or None where the type has no such value."""
    kind = row["type"]
    try:
        if kind == "bool":
            return {"true": True, "false": False}[text]
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind in ("choice", "text"):
            return text
        if kind == "ints":
            return tuple(int(x) for x in text.split(","))
        if kind == "floats":
            return tuple(float(x) for x in text.split(","))
        if kind == "indices":
            return [int(x) for x in text.split(",")]
        if kind == "texts":
            return text.split(",")
        if kind == "threads":
            return int(text) if text.isdigit() else text
        if kind == "size":
            parts = [int(x) for x in text.split(",")]
            return parts[0] if len(parts) == 1 else tuple(parts)
    except (KeyError, ValueError):
        return None
    raise AssertionError(f"unknown option type {kind}")


def shown(dsc_binary, *args):
    run = subprocess.run([dsc_binary, "bench", "--show-options", *args], capture_output=True, text=True)
    values = dict(line.split(" = ", 1) for line in run.stdout.splitlines() if " = " in line)
    return run.returncode, values, run.stdout + run.stderr


def context(row):
    """(preset, keyword arguments, dsc bench flags) a row needs beside it: a worker for the remote group,
    a crop mode that uses a crop option."""
    name = row["name"]
    if name in ("out_size", "out_w", "out_h", "scale", "ratio"):
        return "imagenet-train", {}, ["--preset", "imagenet-train"]
    if name == "resize":
        return "imagenet-test", {}, ["--preset", "imagenet-test"]
    if name == "center_ratio":
        return "imagenet-test", {"resize": 0}, ["--preset", "imagenet-test", "--resize", "0"]
    if row["needs"] == "remote":
        return "cifar-train", {"remote": "127.0.0.1:1"}, ["--remote", "127.0.0.1:1"]
    return "cifar-train", {}, []


def test_every_python_option_is_in_the_table_and_named_by_it():
    table = {row["name"]: row for row in _dsc.loader_option_table()}
    assert set(dsc.LOADER_OPTIONS) == {name for name, row in table.items() if row["python"]}
    assert len(dsc.LOADER_OPTIONS) >= 48
    for name in dsc.LOADER_OPTIONS:
        assert f"- {name} [" in dsc.Loader.__doc__, name  # help(dsc.Loader) lists it with its help line


def test_python_and_the_cli_resolve_each_option_alike(dsc_binary):
    rc, defaults, out = shown(dsc_binary)
    assert rc == 0, out
    assert defaults == {k: v for k, v in _dsc.resolved_loader_options("cifar-train", {}).items() if k in defaults}
    compared = 0
    for row in _dsc.loader_option_table():
        if not (row["python"] and row["cli"]) or not row["example"] or row["type"] == "text":
            continue
        if row["name"] == "defer_augment":  # True is refused in Python (test_module.py says why)
            continue
        value = python_value(row, row["example"])
        assert value is not None, row
        preset, kwargs, extra = context(row)
        got = _dsc.resolved_loader_options(preset, {**kwargs, row["name"]: value})
        flag = "--" + row["name"].replace("_", "-")
        rc, cli, out = shown(dsc_binary, f"{flag}={row['example']}", *extra)
        assert rc == 0, out
        assert got[row["name"]] == cli[row["name"]], (row["name"], got[row["name"]], cli[row["name"]])
        compared += 1
    assert compared >= 40


def test_a_refused_value_gives_the_cli_reason(dsc_binary):
    compared = 0
    for row in _dsc.loader_option_table():
        if not (row["python"] and row["cli"]) or not row["bad"]:
            continue
        value = python_value(row, row["bad"])
        if value is None:  # "maybe" for a bool: a TypeError in Python, checked below
            continue
        preset, kwargs, extra = context(row)
        with pytest.raises(dsc.OptionError) as python_error:
            _dsc.resolved_loader_options(preset, {**kwargs, row["name"]: value})
        rc, _, out = shown(dsc_binary, f"--{row['name'].replace('_', '-')}={row['bad']}", *extra)
        assert rc == 2, out
        reason = str(python_error.value).split(": ", 1)[1]
        assert f": {reason}" in out, (row["name"], reason, out)
        compared += 1
    assert compared >= 25
    with pytest.raises(TypeError, match="flip must be a bool"):
        _dsc.resolved_loader_options(None, {"flip": "maybe"})
    with pytest.raises(dsc.OptionError, match="option tls_root needs option remote"):
        _dsc.resolved_loader_options(None, {"tls_root": "/dev/null"})
