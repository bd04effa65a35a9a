#!/usr/bin/env python3
"""Checks that what README.md, docs/ and deploy/'s dashboards and alert
rules name exists:

- every --flag is in a binary's --help (every subcommand's, for the CLI;
  and torchrun's and venv's, which docs/pytorch.md maps from) or in a file
  of the repository that is not documentation (a script's own flags, or a
  tool's that a script runs);
- every ringmaster_* metric is registered by the code;
- every RINGMASTER_* and TORCHELASTIC_* environment variable is in the
  code;
- every key of a job spec in a ```yaml block (and examples/*.yaml) is a
  field of JobSpec in proto/job.proto, nested messages included;
- every code name in backquotes (`Class::Method`, `Function()`, a
  CamelCase type) is in the sources: a method in its class's files;
- a flag's default or limit is the same wherever the docs state it: in a
  table's default column, as "`--flag` (30s)", "1.3 (`--flag`)" or
  "`--flag` ... (default 200)"; 60s and 1m are the same.

Prints one line per name that does not exist, naming the file and line;
exits 1 when there is any.

    docs_check.py --root SOURCE_TREE --bin DIR_WITH_client/ringmaster_ETC
"""
import argparse
import glob
import os
import re
import subprocess
import sys

import yaml

FLAG = re.compile(r"(?<![\w/-])--[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*")
METRIC = re.compile(r"\bringmaster_[a-z0-9_]+")
ENV = re.compile(r"\b(?:RINGMASTER|TORCHELASTIC)_[A-Z0-9_]*[A-Z0-9]\b")
METRIC_SUFFIXES = ("_bucket", "_sum", "_count")
CODE_NAME = re.compile(r"`((?:[A-Za-z_]\w*::)+[A-Za-z_]\w*(?:\(\))?|[A-Za-z_][\w.]*\(\)|"
                       r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)`")
# Names of other projects' types and calls that the docs map from or to.
OTHER_PROJECTS = {
    "PyTorchJob", "PodMonitor", "TCPStore", "DistributedDataParallel", "ServiceMonitor",
    "StatefulSet", "DaemonSet", "PersistentVolumeClaim", "ConfigMap", "GcsServer",
    "DynamicUser", "ReadWritePaths", "ProtectSystem", "ExecStart", "AmbientCapabilities",
    "PrivateTmp", "StateDirectory", "NoNewPrivileges", "SslTargetNameOverride",
    "increase()", "init_process_group()", "KeyError",
    # Slurm's and Kueue's, in docs/scheduling.md's comparison.
    "GrpTRES", "MaxTRES", "AllowAccounts", "AllowGroups", "MaxJobsPerUser", "GraceTime",
    "QuotaReserved",
}
# In a plain ``` block (a diagram): CamelCase names and calls.
DIAGRAM_NAME = re.compile(r"(?<![\w.:/-])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Za-z_]\w*\(\))")


def documents(root):
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    files += sorted(glob.glob(os.path.join(root, "deploy", "grafana", "*.json")))
    files += sorted(glob.glob(os.path.join(root, "deploy", "prometheus", "*.yml")))
    return files


def code_text(root):
    """{path: text} of every file of the tree but the documentation: where
    a name may be defined or used."""
    parts = {}
    docs = set(documents(root))
    for directory, subdirs, files in os.walk(root):
        # Not the npm packages the browser test installs: not the product's.
        subdirs[:] = [d for d in subdirs if d not in (".git", "node_modules")
                      and not d.startswith("bazel-")
                      and not (directory == root and d == "docs")]
        for name in files:
            path = os.path.join(directory, name)
            if name.endswith(".md") or path in docs:
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    parts[path] = f.read()
            except (UnicodeDecodeError, OSError):
                continue
    return parts


def help_text(bin_dir):
    """The --help of every binary, and of every subcommand of the CLI."""
    def run(argv):
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout

    cli = os.path.join(bin_dir, "client", "ringmaster")
    texts = [run([cli, "--help"])]
    pending = [[]]
    while pending:
        path = pending.pop()
        text = run([cli] + path + ["--help"])
        texts.append(text)
        if "Subcommands:" in text:
            block = text.split("Subcommands:", 1)[1]
            for line in block.splitlines()[1:]:
                match = re.match(r"  (\S+)\s", line)
                if not match:
                    break
                pending.append(path + [match.group(1)])
    for program in ("coordinator/ringmaster-coordinator", "worker/ringmaster-worker",
                    "trainer/ringmaster-trainer"):
        texts.append(run([os.path.join(bin_dir, program), "--help"]))
    # The tools docs/pytorch.md maps from: torchrun (python3-torch) and venv.
    for module in ("torch.distributed.run", "venv"):
        texts.append(run([sys.executable, "-m", module, "--help"]))
    return "\n".join(texts)


def proto_messages(proto_path):
    """{message name: {field name: type name}} from a .proto file; nested
    messages by their own names."""
    messages = {}
    stack = []
    with open(proto_path) as f:
        for line in f:
            line = line.split("//")[0].strip()
            match = re.match(r"message (\w+) \{", line)
            if match:
                stack.append(match.group(1))
                messages[match.group(1)] = {}
                continue
            if line.startswith("enum ") or line.startswith("oneof "):
                stack.append(None)
                continue
            if line == "}":
                stack.pop()
                continue
            match = re.match(r"(?:optional |repeated )?(map<[^>]+>|[\w.]+) (\w+) = \d+", line)
            if match and stack and stack[-1]:
                messages[stack[-1]][match.group(2)] = match.group(1)
    return messages


def spec_problems(spec, messages, message="JobSpec", where=""):
    problems = []
    if not isinstance(spec, dict):
        return problems
    fields = messages[message]
    for key, value in spec.items():
        if key not in fields:
            problems.append(f"{where}{key}: {message} has no such field")
            continue
        kind = fields[key]
        if kind in messages:
            problems += spec_problems(value, messages, kind, f"{where}{key}.")
    return problems


def yaml_blocks(text):
    """(line number, text) of each ```yaml block."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```yaml":
            start = i + 1
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                i += 1
            blocks.append((start + 1, "\n".join(lines[start:i])))
        i += 1
    return blocks


def is_job_spec(document):
    return isinstance(document, dict) and "ranks" in document and (
        "trainer" in document or "command" in document)


def code_name_problem(name, code, sources):
    """Why `name` is not in the sources, or None."""
    if name in OTHER_PROJECTS:
        return None
    if "::" in name:
        parts = name.removesuffix("()").split("::")
        if name.removesuffix("()") in code:
            return None
        owner, member = parts[-2], parts[-1]
        declares = [text for text in sources.values()
                    if re.search(rf"\b(class|struct|namespace) {owner}\b", text)]
        if any(re.search(rf"\b{member}\b", text) for text in declares):
            return None
        return f"no {member} in the sources of {owner}"
    if name.endswith("()"):
        function = name[:-2].split(".")[-1]
        return None if re.search(rf"\b{function}\(", code) else "no such function in the sources"
    return None if re.search(rf"\b{name}\b", code) else "no such name in the sources"


# A value a doc gives a flag: a number, with a unit of time or size, or a
# share ("30s", "1m", "1.3", "200", "25%", "1.3×").
VALUE = r"(\d+(?:\.\d+)?(?:ms|s|m|h|%|×| MiB| MB| GiB)?)"
FLAG_THEN_VALUE = re.compile(r"`(--[a-z][a-z0-9-]*)(?: [A-Z_.]+)?`(?:[^.`()]{0,30}?\(default:? | \()"
                             + VALUE + r"[),;]")
VALUE_THEN_FLAG = re.compile(VALUE + r" \(`(--[a-z][a-z0-9-]*)`\)")
DEFAULT_ROW = re.compile(r"^\|\s*`(--[a-z][a-z0-9-]*)`[^|]*\|\s*" + VALUE + r"\s*\|")
SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def normal(value):
    """A value as comparable: durations in seconds, other numbers without
    their unit (a flag's unit is in its name: --max-upload-mb)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", value.strip())
    if m and m.group(2):
        return float(m.group(1)) * SECONDS[m.group(2)]
    return float(re.match(r"\d+(?:\.\d+)?", value).group(0))


def stated_defaults(root, docs):
    """(flag, normal value, where) for each default stated."""
    out = []
    for path in docs:
        if not path.endswith(".md"):
            continue
        shown = os.path.relpath(path, root)
        with open(path) as f:
            lines = f.read().splitlines()
        header = None  # the header row of the table a line is in
        for number, line in enumerate(lines, 1):
            if not line.startswith("|"):
                header = None
            elif header is None:
                header = [c.strip().lower() for c in line.strip("|").split("|")]
            elif len(header) > 1 and header[1] == "default":
                m = DEFAULT_ROW.match(line)
                if m:
                    out.append((m.group(1), normal(m.group(2)), f"{shown}:{number}"))
                continue
            for m in FLAG_THEN_VALUE.finditer(line):
                out.append((m.group(1), normal(m.group(2)), f"{shown}:{number}"))
            for m in VALUE_THEN_FLAG.finditer(line):
                out.append((m.group(2), normal(m.group(1)), f"{shown}:{number}"))
    return out


def conflicting_defaults(root, docs):
    """One problem per pair of files that state a flag's default apart.
    Within one file, sections of several programs may give one flag name
    different defaults (the coordinator's --port is not the worker's)."""
    by_flag = {}
    for flag, value, where in stated_defaults(root, docs):
        by_flag.setdefault(flag, []).append((value, where))
    problems = []
    for flag, stated in sorted(by_flag.items()):
        for i, (value, where) in enumerate(stated):
            for other, other_where in stated[i + 1:]:
                if value != other and where.split(":")[0] != other_where.split(":")[0]:
                    problems.append(f"{other_where}: {flag}: its default is stated as "
                                    f"{other:g} here and {value:g} at {where}")
    return problems


def check(root, known_help, code, docs=None):
    problems = []
    sources = {path: text for path, text in code.items()
               if path.endswith((".cc", ".h", ".py", ".proto"))}
    # Names the alert rules define may be named too.
    alerts = os.path.join(root, "deploy", "prometheus", "alerts.yml")
    alert_names = open(alerts).read() if os.path.exists(alerts) else ""
    messages = proto_messages(os.path.join(root, "proto", "job.proto"))
    # Registered by the product, not only named by a test.
    product = "\n".join(text for path, text in code.items()
                         if "_test" not in path and "/tests/" not in path)
    metric_names = set(re.findall(r'"(ringmaster_[a-z0-9_]+)"', product))
    code = "\n".join(code.values())
    for path in docs or documents(root):
        shown = os.path.relpath(path, root)
        with open(path) as f:
            text = f.read()
        fence = None  # the language of the ``` block a line is in
        for number, line in enumerate(text.splitlines(), 1):
            if line.startswith("```"):
                fence = None if fence is not None else line[3:].strip()
                continue
            if fence == "":
                for name in DIAGRAM_NAME.findall(line):
                    why = code_name_problem(name, code + alert_names, sources)
                    if why:
                        problems.append(f"{shown}:{number}: {name}: {why}")
            for flag in FLAG.findall(line):
                if not re.search(re.escape(flag) + r"(?![\w-])", known_help + code):
                    problems.append(f"{shown}:{number}: {flag}: no --help and no file of the "
                                    "repository has this flag")
            for metric in METRIC.findall(line):
                name = metric
                for suffix in METRIC_SUFFIXES:
                    if name.endswith(suffix) and name[:-len(suffix)] in metric_names:
                        name = name[:-len(suffix)]
                if name not in metric_names:
                    problems.append(f"{shown}:{number}: {metric}: no such metric is registered")
            for name in CODE_NAME.findall(line):
                why = code_name_problem(name, code + alert_names, sources)
                if why:
                    problems.append(f"{shown}:{number}: {name}: {why}")
            for variable in ENV.findall(line):
                if not re.search(r"\b" + variable + r"\b", code):
                    problems.append(f"{shown}:{number}: {variable}: no such environment "
                                    "variable in the code")
        for number, block in yaml_blocks(text):
            try:
                parsed = list(yaml.safe_load_all(block))
            except yaml.YAMLError as e:
                problems.append(f"{shown}:{number}: a yaml block does not parse: {e}")
                continue
            for document in parsed:
                if is_job_spec(document):
                    problems += [f"{shown}:{number}: {p}" for p in spec_problems(document, messages)]
    problems += conflicting_defaults(root, docs or documents(root))
    for path in sorted(glob.glob(os.path.join(root, "examples", "**", "*.yaml"), recursive=True)):
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if is_job_spec(document):
                    problems += [f"{os.path.relpath(path, root)}: {p}"
                                 for p in spec_problems(document, messages)]
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the source tree")
    parser.add_argument("--bin", required=True, help="where client/ringmaster etc. are")
    args = parser.parse_args()
    problems = check(args.root, help_text(args.bin), code_text(args.root))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
