"""load_files reads UTF-8 (with or without BOM) and BOM-marked UTF-16; other bytes are an issue, not a crash."""

from pathlib import Path

from karpenter_lambda.api.manifests import load_files

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "default.yaml"


def test_bom_marked_files_load_like_plain_utf8(tmp_path):
    text = EXAMPLE.read_text()
    (tmp_path / "bom8.yaml").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "utf16.yaml").write_bytes(text.encode("utf-16"))
    for name in ("bom8.yaml", "utf16.yaml"):  # one at a time: together they are the same objects twice
        result = load_files([tmp_path / name])
        assert result.ok, [str(i) for i in result.issues]
        assert sorted((o.kind, o.name) for o in result.objects) == [("EC2NodeClass", "default"), ("NodePool", "default")]


def test_undecodable_file_is_an_issue_naming_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"apiVersion: v1\nkind: \xc3\x28\n")
    good = tmp_path / "good.yaml"
    good.write_text(EXAMPLE.read_text())
    result = load_files([bad, good])
    assert [str(i) for i in result.issues] == [f"{bad}:0: ?/?: cannot read file: not UTF-8 text (byte 21: invalid continuation byte)"]
    assert len(result.objects) == 2  # the other file is still loaded
