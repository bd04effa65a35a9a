"""The client's own reading of specs and packing of uploads, without a
cluster."""
import gzip
import io
import os
import tarfile

import pytest

from conftest import REPO
from ringmaster import InvalidSpec
from ringmaster._ignore import IgnoreRules, glob_match
from ringmaster._pack import pack_directory
from ringmaster._spec import to_job_spec
from ringmaster.v1 import job_pb2
from google.protobuf import text_format


def test_the_cli_s_ignore_rule_cases():
    """client/ignore_rules_cases.txt, which the CLI's rules are tested
    against too."""
    section, rules_text, cases = "", "", 0
    with open(os.path.join(REPO, "client/ignore_rules_cases.txt")) as f:
        for line in f.read().split("\n")[:-1]:
            if line.startswith("["):
                if line == "[rules]":
                    rules_text = ""
                section = line
                continue
            if section == "[rules]":
                rules_text += line + "\n"
                continue
            fields = line.split("\t")
            if section == "[globs]":
                assert glob_match(fields[1], fields[2]) == (fields[0] == "match"), line
                cases += 1
            elif section == "[paths]":
                ignored = IgnoreRules(rules_text).ignored(fields[2], fields[1] == "dir")
                assert ignored == (fields[0] == "ignored"), (line, rules_text)
                cases += 1
    assert cases >= 30


def spec_cases():
    """domain/job_spec_cases.txt: (what, the spec as written, "spec" or
    "error", what it reads as)."""
    cases, what, part, parts = [], None, None, {}
    with open(os.path.join(REPO, "domain/job_spec_cases.txt")) as f:
        lines = f.read().split("\n")[:-1]
    for line in lines + ["=== "]:
        if line.startswith("=== "):
            if what is not None:
                kind = "spec" if "spec" in parts else "error"
                cases.append((what, "\n".join(parts["in"]) + "\n", kind,
                              "\n".join(parts[kind])))
            what, part, parts = line[4:], "in", {"in": []}
        elif line.startswith("--- "):
            part = line[4:]
            parts[part] = []
        elif what is not None:
            parts[part].append(line)
        else:
            assert line.startswith("#") or not line, line
    return cases


@pytest.mark.parametrize("what, text, kind, want", spec_cases(), ids=lambda c: None)
def test_the_cli_s_spec_cases(what, text, kind, want):
    """domain/job_spec_cases.txt, which the CLI's reader is tested against
    too."""
    if kind == "spec":
        expected = text_format.Parse(want, job_pb2.JobSpec())
        assert to_job_spec(text) == expected, what
    else:
        with pytest.raises(InvalidSpec) as refused:
            to_job_spec(text)
        assert want in str(refused.value), what


def test_there_are_spec_cases():
    assert len(spec_cases()) >= 20


def test_a_yaml_spec_reads_as_the_cli_reads_it():
    spec = to_job_spec("""
name: sweep
ranks: 2
max_restarts: 0
labels: {lr: 0.1, on: yes}
trainer:
  epochs: 3
  optimizer: {type: sgd, lr: 0.05}
  model: {type: mlp, hidden: [64, 32]}
  data: {path: digits}
""")
    assert spec.name == "sweep" and spec.ranks == 2
    assert spec.HasField("max_restarts") and spec.max_restarts == 0
    assert dict(spec.labels) == {"lr": "0.1", "on": "yes"}, "label values as written"
    assert spec.trainer.optimizer.lr == 0.05
    assert list(spec.trainer.model.hidden) == [64, 32]


def test_a_dict_takes_python_values():
    spec = to_job_spec({"name": "d", "ranks": 3, "preemptible": False, "env": {"N": 1},
                        "trainer": {"optimizer": {"lr": 1}}})
    assert spec.ranks == 3 and spec.HasField("preemptible") and not spec.preemptible
    assert dict(spec.env) == {"N": "1"}
    assert spec.trainer.optimizer.lr == 1.0


@pytest.mark.parametrize("spec, words", [
    ({"name": "x", "ranks": 1.5}, "ranks: expected an integer, got \"1.5\""),
    ({"name": "x", "ranks": True}, "ranks: expected an integer"),
    ({"name": "x", "command": "true"}, 'command: expected a list, got "true"'),
    ({"name": "x", "trainer": {"optimizer": {"lr": "fast"}}},
     'trainer.optimizer.lr: expected a number, got "fast"'),
    ({"name": "x", "preemptible": "maybe"}, 'preemptible: expected true or false, got "maybe"'),
    ({"name": "x", "labels": {"a": [1]}}, "labels.a: expected a value, got a list"),
    ({"name": "x", "ranks": 1 << 40}, "ranks: integer out of range"),
    ("- a\n- b\n", "job spec: expected a mapping, got a list"),
    ("name: [x\n", "line 2, column 1"),
    ("{\"name\": \"x\", \"name\": \"y\"}", "name: duplicate key (first at line 1)"),
])
def test_a_bad_spec_names_what_is_wrong(spec, words):
    with pytest.raises(InvalidSpec) as refused:
        to_job_spec(spec)
    assert words in str(refused.value)


def test_a_deep_document_is_refused_as_the_cli_refuses_it():
    with pytest.raises(InvalidSpec) as refused:
        to_job_spec("command: " + "[" * 100000 + "]" * 100000)
    assert "nested too deep" in str(refused.value)


def test_a_spec_message_is_copied_not_changed():
    original = job_pb2.JobSpec(name="m", ranks=1)
    copy = to_job_spec(original)
    copy.working_dir = "/x"
    assert original.working_dir == ""


def pack_cases():
    """client/code_package_cases.txt: (what, tree lines, packed members,
    sha256)."""
    cases, part = [], None
    with open(os.path.join(REPO, "client/code_package_cases.txt")) as f:
        for line in f.read().split("\n")[:-1]:
            if line.startswith("=== "):
                cases.append((line[4:], [], [], []))
                part = 1
            elif line.startswith("--- "):
                part = {"packed": 2, "sha256": 3}[line[4:]]
            elif cases:
                cases[-1][part].append(line)
    return [(what, tree, packed, sha[0]) for what, tree, packed, sha in cases]


def unescape(text):
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append({"n": "\n", "t": "\t"}.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


@pytest.mark.parametrize("what, tree, packed, sha256", pack_cases(), ids=lambda c: None)
def test_the_cli_s_pack_cases(tmp_path, what, tree, packed, sha256):
    """client/code_package_cases.txt, which the CLI's packing is tested
    against too: the same members, and the same bytes."""
    top = tmp_path / "code"
    top.mkdir()
    for line in tree:
        kind, rest = line.split(" ", 1)
        if kind == "dir":
            (top / rest).mkdir(parents=True, exist_ok=True)
            continue
        path, more = rest.split(" ", 1)
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        if kind == "link":
            os.symlink(more, top / path)
        else:
            mode, text = more.split(" ", 1) if " " in more else (more, "")
            (top / path).write_text(unescape(text))
            (top / path).chmod(int(mode, 8))
    with open(tmp_path / "a.tgz", "w+b") as out:
        result = pack_directory(str(top), 1 << 20, out)
        out.seek(0)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(out.read()))) as tar:
            members = []
            for m in tar.getmembers():
                if m.isdir():
                    members.append(f"dir {m.name} {m.mode:04o}")
                elif m.issym():
                    members.append(f"link {m.name} {m.linkname}")
                else:
                    members.append(f"file {m.name} {m.mode:04o} {m.size}")
    assert members == packed, what
    assert result.sha256 == sha256, what


def test_a_directory_packs_to_the_same_bytes_every_time(tmp_path):
    top = tmp_path / "code"
    (top / "src").mkdir(parents=True)
    (top / "src" / "train.py").write_text("print(1)\n")
    (top / "run.sh").write_text("#!/bin/sh\n")
    (top / "run.sh").chmod(0o700)
    (top / "model.ckpt").write_bytes(b"w" * 100)
    (top / ".git").mkdir()
    (top / ".git" / "HEAD").write_text("ref\n")
    os.symlink("src/train.py", top / "main.py")
    (top / ".ringmasterignore").write_text("*.ckpt\n")
    with open(tmp_path / "a.tgz", "w+b") as a, open(tmp_path / "b.tgz", "w+b") as b:
        first = pack_directory(str(top), 1 << 20, a)
        os.utime(top / "run.sh", (0, 12345))  # times are not packed
        second = pack_directory(str(top), 1 << 20, b)
        assert first == second
        assert first.files == 3 and first.archive_bytes == os.path.getsize(tmp_path / "a.tgz")
        a.seek(0)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(a.read()))) as tar:
            members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == [".ringmasterignore", "main.py", "run.sh", "src", "src/train.py"]
    assert members["run.sh"].mode == 0o755 and members["src/train.py"].mode == 0o644
    assert members["main.py"].issym() and members["main.py"].linkname == "src/train.py"
    assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members.values())
