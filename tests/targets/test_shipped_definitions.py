"""buildgen's own rules, tags and attribute schemas against the meta-schemas.

A registry load trusts the definitions buildgen ships (it checks a plug-in's): these tests
are where the shipped ones are checked, with the same checks a plug-in's files get."""

import jsonschema
import pytest

from buildgen.resources import rules_dir, schemas_dir
from buildgen.targets.documents import meta_schema, read_yaml_document
from buildgen.targets.kinds import load_kind

RULES = sorted(p for p in rules_dir().glob("*.yaml") if p.stem != "tags")


@pytest.mark.parametrize("rules_file", RULES, ids=lambda p: p.stem)
def test_a_shipped_kind_passes_every_check_a_plugin_gets(rules_file):
    schema_file = schemas_dir() / "targets" / f"{rules_file.stem}.schema.json"
    kind = load_kind(rules_file, schema_file)  # meta-schema, check_schema, attribute rules
    jsonschema.Draft202012Validator.check_schema(kind.schema)


def test_the_shipped_tags_match_their_meta_schema():
    read_yaml_document(rules_dir() / "tags.yaml", meta_schema("tags"))


def test_the_manifest_schema_is_a_valid_json_schema():
    import json

    schema = json.loads((schemas_dir() / "manifest.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
