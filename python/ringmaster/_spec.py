"""A job spec from what a caller has at hand: a ringmaster.v1.JobSpec, a
dict, a YAML or JSON document, or the path of one. Read as the CLI reads a
spec file: fields by their names in proto/job.proto, unknown fields and
duplicate keys refused, and errors naming the field ("trainer.optimizer.lr:
expected a number, got \"fast\"")."""
import json
import os
from typing import Any, Dict, Union

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from ringmaster.errors import InvalidSpec
from ringmaster.v1 import job_pb2

MAX_SPEC_BYTES = 1 << 20  # as the coordinator's --max-spec-bytes default

SpecLike = Union[job_pb2.JobSpec, Dict[str, Any], str, "os.PathLike[str]"]

_INTEGERS = {FieldDescriptor.CPPTYPE_INT32: (-(1 << 31), (1 << 31) - 1),
             FieldDescriptor.CPPTYPE_INT64: (-(1 << 63), (1 << 63) - 1)}
_NULLS = {"", "~", "null", "Null", "NULL"}


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return json.dumps(value) if isinstance(value, str) else f'"{value}"'


def _scalar(field: FieldDescriptor, value: Any, path: str) -> Any:
    """`value` (YAML's text, or a Python value) as `field` holds it."""
    if isinstance(value, (dict, list)):
        raise InvalidSpec(f"{path}: expected a value, got {_describe(value)}")
    kind = field.cpp_type
    text = value if isinstance(value, str) else None
    if kind == FieldDescriptor.CPPTYPE_STRING:
        if isinstance(value, bool):
            return "true" if value else "false"
        return value if text is not None else str(value)
    if kind in _INTEGERS:
        if isinstance(value, bool) or isinstance(value, float):
            raise InvalidSpec(f"{path}: expected an integer, got {_describe(value)}")
        try:
            number = int(text.strip()) if text is not None else int(value)
        except ValueError:
            raise InvalidSpec(f"{path}: expected an integer, got {_describe(value)}") from None
        low, high = _INTEGERS[kind]
        if not low <= number <= high:
            raise InvalidSpec(f"{path}: integer out of range")
        return number
    if kind in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        if isinstance(value, bool):
            raise InvalidSpec(f"{path}: expected a number, got {_describe(value)}")
        try:
            return float(text.strip()) if text is not None else float(value)
        except ValueError:
            raise InvalidSpec(f"{path}: expected a number, got {_describe(value)}") from None
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        if isinstance(value, bool):
            return value
        if text is not None and text.strip().lower() in ("true", "yes", "1", "y", "t"):
            return True
        if text is not None and text.strip().lower() in ("false", "no", "0", "n", "f"):
            return False
        raise InvalidSpec(f"{path}: expected true or false, got {_describe(value)}")
    raise InvalidSpec(f"{path}: unsupported field type")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _set_message(value: Any, message: Message, path: str, from_text: bool) -> None:
    if not isinstance(value, dict):
        raise InvalidSpec(f"{path or 'job spec'}: expected a mapping, got {_describe(value)}")
    fields = message.DESCRIPTOR.fields_by_name
    for name, item in value.items():
        if not isinstance(name, str):
            raise InvalidSpec(f"{_join(path, str(name))}: a key must be text")
        field_path = _join(path, name)
        field = fields.get(name)
        if field is None:
            raise InvalidSpec(f"{field_path}: unknown field")
        if item is None or (from_text and isinstance(item, str) and item in _NULLS and
                            field.cpp_type != FieldDescriptor.CPPTYPE_STRING):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            if not isinstance(item, dict):
                raise InvalidSpec(f"{field_path}: expected a mapping, got {_describe(item)}")
            target = getattr(message, name)
            value_field = field.message_type.fields_by_name["value"]
            for key, entry in item.items():
                target[str(key)] = _scalar(value_field, entry, _join(field_path, str(key)))
        elif field.label == FieldDescriptor.LABEL_REPEATED:
            if not isinstance(item, list):
                raise InvalidSpec(f"{field_path}: expected a list, got {_describe(item)}")
            target = getattr(message, name)
            for i, entry in enumerate(item):
                if field.message_type is not None:
                    _set_message(entry, target.add(), f"{field_path}[{i}]", from_text)
                else:
                    target.append(_scalar(field, entry, f"{field_path}[{i}]"))
        elif field.message_type is not None:
            child = getattr(message, name)
            child.SetInParent()
            _set_message(item, child, field_path, from_text)
        else:
            setattr(message, name, _scalar(field, item, field_path))


def _load_text(text: str) -> Any:
    """A YAML (or JSON) document, every scalar kept as its text, as the
    CLI reads it; JSON alone without python3-yaml."""
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise InvalidSpec(f"the job spec is {len(text.encode())} bytes; the limit is "
                          f"{MAX_SPEC_BYTES}")
    try:
        import yaml
    except ImportError:
        try:
            return json.loads(text), False
        except json.JSONDecodeError as e:
            raise InvalidSpec(f"line {e.lineno}, column {e.colno}: {e.msg} (YAML needs "
                              "python3-yaml; this is read as JSON)") from None

    def place(node):
        return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"

    def check_keys(node, path):
        """Keys plain and each once, named by their path as the CLI names
        them ("env.A: duplicate key")."""
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                check_keys(item, f"{path}[{i}]")
        if not isinstance(node, yaml.MappingNode):
            return
        seen = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                kind = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
                raise InvalidSpec(f"{place(key_node)}: {path + ': ' if path else ''}a key must "
                                  f"be a plain value, got {kind}")
            key = key_node.value
            key_path = f"{path}.{key}" if path else key
            if key in seen:
                raise InvalidSpec(f"{place(key_node)}: {key_path}: duplicate key (first at line "
                                  f"{seen[key]})")
            seen[key] = key_node.start_mark.line + 1
            check_keys(value_node, key_path)

    try:
        node = yaml.compose(text, Loader=yaml.BaseLoader)
        if node is None:
            return None, True
        check_keys(node, "")
        # every scalar as text, as the CLI's YAML
        return yaml.BaseLoader(text).construct_document(node), True
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        raise InvalidSpec(f"line {mark.line + 1}, column {mark.column + 1}: {e.problem}") \
            from None
    except RecursionError:
        raise InvalidSpec("job spec: nested too deep") from None


def _looks_like_path(spec: str) -> bool:
    return "\n" not in spec and not spec.lstrip().startswith("{") and ": " not in spec


def to_job_spec(spec: SpecLike) -> job_pb2.JobSpec:
    """The JobSpec `spec` says. InvalidSpec naming the field, or the file
    that cannot be read."""
    if isinstance(spec, job_pb2.JobSpec):
        copy = job_pb2.JobSpec()
        copy.CopyFrom(spec)
        return copy
    where = ""
    from_text = False
    if isinstance(spec, (str, os.PathLike)):
        if isinstance(spec, os.PathLike) or _looks_like_path(spec):
            where = os.fspath(spec)
            try:
                with open(where, encoding="utf-8") as f:
                    spec = f.read()
            except OSError as e:
                raise InvalidSpec(f"cannot read {where}: {e.strerror}") from None
        try:
            spec, from_text = _load_text(spec)
        except InvalidSpec as e:
            raise InvalidSpec(f"{where}: {e}" if where else str(e)) from None
    if not isinstance(spec, dict):
        raise InvalidSpec(f"{where + ': ' if where else ''}job spec: expected a mapping, got "
                          f"{_describe(spec)}")
    message = job_pb2.JobSpec()
    try:
        _set_message(spec, message, "", from_text)
    except InvalidSpec as e:
        raise InvalidSpec(f"{where}: {e}" if where else str(e)) from None
    return message
