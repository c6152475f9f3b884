"""User files as people have them (core/userdata.py): a GLUE-style paraphrase .tsv (quote characters
inside sentences, CRLF line ends, a UTF-8 byte-order mark before the header) reads as written; a
quoted .tsv reads with tsv_quoting; a row with the wrong number of fields is one clear line."""
from __future__ import annotations

import csv
import types

import pytest

from shrinkbert.core.errors import ShrinkbertError

HEADER = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
BOM = "\ufeff"


def glue_rows(n: int = 30) -> list[list[str]]:
    """MRPC-like rows: quote characters that open but never close a field, as in GLUE's msr_paraphrase."""
    rows = []
    for i in range(n):
        first = f'He said "the plan {i} works and left'
        second = f'"Quotes" around {i}, then a lone " mark' if i % 2 else f"plain sentence {i}"
        rows.append([str(i % 2), str(1000 + i), str(2000 + i), first, second])
    return rows


def write_glue_tsv(path, rows, newline="\r\n", bom=True):
    text = newline.join("\t".join(r) for r in [HEADER, *rows]) + newline
    path.write_bytes(((BOM if bom else "") + text).encode("utf-8"))
    return path


def load_pairs(path, **options):
    from shrinkbert.core.data.load import load_task

    return load_task(str(path), text_column="#1 String", text_pair_column="#2 String", label_column="Quality",
                     **options)


def all_rows(splits) -> set[tuple[str, str, int]]:
    return {(r["text"], r["text_pair"], r["label"]) for name in splits for r in splits[name]}


def test_a_glue_style_tsv_reads_as_written(tmp_path, cache_env):
    rows = glue_rows()
    task, splits = load_pairs(write_glue_tsv(tmp_path / "msr_paraphrase_train.tsv", rows))
    assert task.label_names == ("0", "1")
    expected = {(r[3], r[4], int(r[0])) for r in rows}
    assert all_rows(splits) == expected  # every quote kept, no row merged with the next, no \r left over


def test_crlf_and_lf_and_the_bom_read_alike(tmp_path, cache_env):
    rows = glue_rows()
    crlf = load_pairs(write_glue_tsv(tmp_path / "crlf.tsv", rows))[1]
    lf = load_pairs(write_glue_tsv(tmp_path / "lf.tsv", rows, newline="\n", bom=False))[1]
    assert all_rows(crlf) == all_rows(lf)
    assert {n: len(s) for n, s in crlf.items()} == {n: len(s) for n, s in lf.items()}


def test_a_bom_and_crlf_csv_finds_its_first_column(tmp_path, cache_env):
    from shrinkbert.core.data.load import load_task

    path = tmp_path / "excel.csv"
    lines = ["text,label"] + [f'"a movie, {i}",{"good" if i % 2 else "bad"}' for i in range(20)]
    path.write_bytes((BOM + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    task, splits = load_task(str(path))  # a BOM glued to "text" would be "no text column 'text'"
    assert task.label_names == ("bad", "good")
    assert "a movie, 3" in {r["text"] for name in splits for r in splits[name]}


@pytest.mark.parametrize("cells, count", [(6, 6), (4, 4)])
def test_a_row_with_the_wrong_field_count_is_one_clear_line(tmp_path, cells, count):
    from shrinkbert.core.userdata import read_table

    rows = glue_rows(12)
    rows[6] = (rows[6] + ["stray"])[:cells] if cells > 5 else rows[6][:cells]  # pandas would pad a short row
    path = write_glue_tsv(tmp_path / "bad.tsv", rows)
    with pytest.raises(ShrinkbertError) as err:
        read_table(path)
    message = str(err.value)
    assert "\n" not in message
    assert message == (f"{path} line 8: {count} tab-separated fields, expected 5 as in its header "
                       "(a tab inside a text, or a missing cell?)")


def test_tsv_quoting_reads_a_quoted_tsv(tmp_path, cache_env):
    path = tmp_path / "quoted.tsv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\r\n")
        writer.writerow(["text", "label"])
        for i in range(20):
            writer.writerow([f'a\ttab and "quotes" {i}', "pos" if i % 2 else "neg"])
    _, splits = load_pairs_plain(path, tsv_quoting=True)
    assert 'a\ttab and "quotes" 3' in {r["text"] for name in splits for r in splits[name]}
    with pytest.raises(ShrinkbertError, match=r"line 2: 3 tab-separated fields, expected 2"):
        load_pairs_plain(path)  # unquoted by default: the tab inside the text is a third field


def load_pairs_plain(path, **options):
    from shrinkbert.core.data.load import load_task

    return load_task(str(path), **options)


def test_a_quoted_csv_row_with_a_stray_field_names_its_line(tmp_path):
    from shrinkbert.core.userdata import read_table

    path = tmp_path / "bad.csv"
    path.write_text("text,label\n" + "".join(f"movie {i},good\n" for i in range(5)) + "a, b,good\n")
    with pytest.raises(ShrinkbertError) as err:
        read_table(path)
    assert str(err.value).startswith(f"{path} line 7: 3 fields, expected 2")


def test_tsv_quoting_is_part_of_the_inherited_data_spec(tmp_path):
    from shrinkbert.core.artifacts import write_manifest
    from shrinkbert.core.configs import DataConfig
    from shrinkbert.core.data.dataspec import resolve_spec

    task = str(write_glue_tsv(tmp_path / "t.tsv", glue_rows()))
    own = resolve_spec(DataConfig(task=task, tsv_quoting=True))
    assert own.tsv_quoting is True and own.record()["tsv_quoting"] is True
    parent = tmp_path / "parent"
    parent.mkdir()
    write_manifest(parent, stage="fake", data=own.record())
    child = resolve_spec(types.SimpleNamespace(task="", tsv_quoting=None), parents=[parent])
    assert child.tsv_quoting is True  # named once, inherited
    assert resolve_spec(types.SimpleNamespace(task="", tsv_quoting=False), parents=[parent]).tsv_quoting is False
