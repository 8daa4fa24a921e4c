"""MMLU csv loading, prompt format, answer parsing and malformed-data errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import accuracy_support  # noqa: F401  (makes the package importable)
from accuracy_support.dataset_writer import write_dataset
from accuracy_support.special_files import fifo, sparse, within
from sglang_nvfp4_patches.accuracy.dataset import load_eval_items, open_source, read_mmlu_csv
from sglang_nvfp4_patches.accuracy.errors import DatasetError
from sglang_nvfp4_patches.accuracy.limits import MAX_CSV_BYTES
from sglang_nvfp4_patches.accuracy.scoring import parse_prediction
from sglang_nvfp4_patches.cli import main


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _dataset(root: Path, test_csv: str, dev_csv: str, subject: str = "college_math") -> Path:
    _write(root / "test" / f"{subject}_test.csv", test_csv)
    _write(root / "dev" / f"{subject}_dev.csv", dev_csv)
    return root


def test_prompt_has_classic_mmlu_format(tmp_path: Path) -> None:
    dev = "1+1?,1,2,3,4,B\n2+2?,2,3,4,5,C\nunused?,a,b,c,d,A\n"
    test = '"What is 3+3, in base ""ten""?",5,6,7,8,B\n'
    root = _dataset(tmp_path, test, dev)
    (item,) = load_eval_items(open_source(root), shots=2)
    expected = (
        "The following are multiple choice questions (with answers) about college math.\n\n"
        "1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n"
        "2+2?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: C\n\n"
        'What is 3+3, in base "ten"?\nA. 5\nB. 6\nC. 7\nD. 8\nAnswer:'
    )
    assert item.prompt == expected
    assert item.id == "college_math/0"
    assert item.question.answer == "B"


def test_zero_shot_needs_no_dev_file(tmp_path: Path) -> None:
    _write(tmp_path / "test" / "law_test.csv", "Q?,a,b,c,d,D\n")
    (item,) = load_eval_items(open_source(tmp_path), shots=0)
    assert item.prompt == (
        "The following are multiple choice questions (with answers) about law.\n\n"
        "Q?\nA. a\nB. b\nC. c\nD. d\nAnswer:"
    )


def test_quoted_multiline_rows_blank_lines_and_ids(tmp_path: Path) -> None:
    text = 'first,a,b,c,d,A\n\n"multi\nline, with comma",a,"b,b",c,d, c \nthird,a,b,c,d,D\n'
    questions = read_mmlu_csv(_write(tmp_path / "x_test.csv", text), "x")
    assert [q.id for q in questions] == ["x/0", "x/1", "x/2"]
    assert questions[1].question == "multi\nline, with comma"
    assert questions[1].choices == ("a", "b,b", "c", "d")
    assert [q.answer for q in questions] == ["A", "C", "D"]


def test_subjects_and_limit_select_questions(tmp_path: Path) -> None:
    written = write_dataset(tmp_path, {"alpha": 6, "beta": 4, "gamma": 3})
    items = load_eval_items(open_source(tmp_path), shots=5, subjects=["gamma", "alpha"], limit=2)
    assert [i.id for i in items] == ["gamma/0", "gamma/1", "alpha/0", "alpha/1"]
    for item in items:
        assert item.question.question == written[item.id].question
        assert item.question.choices == written[item.id].choices
        assert item.prompt.count("\nAnswer: ") == 5


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("ok,a,b,c,d,A\nshort,a,b,c,A\n", 2, "expected 6 columns"),
        ('ok,a,b,c,d,A\n"two\nlines",a,b,c,d,A\nbad,a,b,c,d,E\n', 4, "answer must be one of"),
        ("ok,a,b,c,d,A\n\n\nbad,a,b,c,d,\n", 4, "answer must be one of"),
        ("q,a,b,c,d,e,f,A\n", 1, "found 8"),
    ],
)
def test_malformed_row_names_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = _write(tmp_path / "test" / "s_test.csv", text)
    _write(tmp_path / "dev" / "s_dev.csv", "q,a,b,c,d,A\n" * 5)
    with pytest.raises(DatasetError) as info:
        load_eval_items(open_source(tmp_path), shots=5)
    assert f"{path}:{line}:" in str(info.value)
    assert fragment in str(info.value)


def test_bad_dev_row_names_dev_file(tmp_path: Path) -> None:
    _dataset(tmp_path, "q,a,b,c,d,A\n", "q,a,b,c,d,A\nq,a,b,c,d,X\n", subject="s")
    with pytest.raises(DatasetError, match=r"s_dev\.csv:2: answer must be one of"):
        load_eval_items(open_source(tmp_path), shots=2)


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        (lambda root: None, "not a directory"),
        (lambda root: root.mkdir(), "no 'test' folder"),
        (lambda root: (root / "test").mkdir(parents=True), "no *_test.csv files"),
        (lambda root: _write(root / "test" / "s_test.csv", "q,a,b,c,d,A\n"), "missing dev file"),
        (
            lambda root: _dataset(root, "q,a,b,c,d,A\n", "q,a,b,c,d,A\n", subject="s"),
            "has 1 example(s) but --shots 5 needs 5",
        ),
        (
            lambda root: _dataset(root, "\n\n", "q,a,b,c,d,A\n" * 5, subject="s"),
            "no questions in file",
        ),
    ],
)
def test_missing_or_empty_data_is_a_clear_error(tmp_path: Path, setup, fragment: str) -> None:
    root = tmp_path / "data"
    setup(root)
    with pytest.raises(DatasetError) as info:
        load_eval_items(open_source(root), shots=5)
    assert fragment in str(info.value)


def test_unknown_subject_is_an_error(tmp_path: Path) -> None:
    write_dataset(tmp_path, {"alpha": 2})
    with pytest.raises(DatasetError, match=r"unknown subject.*nope.*available: alpha"):
        load_eval_items(open_source(tmp_path), shots=5, subjects=["alpha", "nope"])


@pytest.mark.parametrize("good_rows", [0, 3, 2000])  # 2000 rows: past the decoder's chunk
def test_invalid_utf8_names_its_offset_in_the_file_and_its_line(
    tmp_path: Path, good_rows: int
) -> None:
    path = tmp_path / "test" / "s_test.csv"
    path.parent.mkdir(parents=True)
    good = "".join(f"question {i} é,a,b,c,d,A\n" for i in range(good_rows)).encode()
    path.write_bytes(good + b"q\xff,a,b,c,d,A\n")
    with pytest.raises(DatasetError) as info:
        load_eval_items(open_source(tmp_path), shots=0)
    assert str(info.value) == (
        f"{path}:{good_rows + 1}: not valid UTF-8 at offset {len(good) + 1} of the file "
        "(byte 0xff); re-save the file as UTF-8"
    )


def test_cli_reports_malformed_data_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "test" / "s_test.csv", "ok,a,b,c,d,A\nbad,a,b,c,d,Z\n")
    _write(tmp_path / "dev" / "s_dev.csv", "q,a,b,c,d,A\n" * 5)
    # Nothing listens on the URL: the data error must come before any request.
    out = tmp_path / "x.json"
    code = main(
        [
            *("accuracy", "run", "--base-url", "http://127.0.0.1:9"),
            *("--data", str(tmp_path), "--out", str(out)),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert f"error: {path}:2: answer must be one of" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" B", "B"),
        ("B", "B"),
        ("\n C.", "C"),
        (" (D)", "D"),
        ("A)", "A"),
        (" Based", None),
        ("As", None),
        ("As.", None),  # a word is not an answer, whatever follows it
        (" b", None),
        ("", None),
        ("  ", None),
        (" E", None),
        (" 1", None),
    ],
)
def test_parse_prediction(text: str, expected: str | None) -> None:
    assert parse_prediction(text) == expected


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("fifo", "s_test.csv: is a FIFO (named pipe), not a regular file"),
        ("huge", f"s_test.csv: is 65 MiB, more than the {MAX_CSV_BYTES // 2**20} MiB"),
        ("dev-fifo", "s_dev.csv: is a FIFO (named pipe), not a regular file"),
    ],
)
def test_a_csv_that_is_not_a_small_regular_file_is_named_without_reading_it(
    tmp_path: Path, case: str, says: str
) -> None:
    """A 600 MB sparse csv once took 1.27 GB before it was refused; a FIFO was "no *_test.csv
    files found"."""
    test_csv = tmp_path / "test" / "s_test.csv"
    dev_csv = _write(tmp_path / "dev" / "s_dev.csv", "q,a,b,c,d,A\n" * 5)
    test_csv.parent.mkdir()
    if case == "fifo":
        fifo(test_csv)
    elif case == "huge":
        sparse(test_csv, MAX_CSV_BYTES + 2**20)
    else:
        _write(test_csv, "q,a,b,c,d,A\n")
        dev_csv.unlink()
        fifo(dev_csv)
    with pytest.raises(DatasetError) as info:
        within(10, lambda: load_eval_items(open_source(tmp_path), shots=5))
    assert says in str(info.value) and str(info.value).startswith(str(tmp_path))
