"""Binary-classification loaders: shapes, class counts and label codings of the reference splits
(SOURCE.md of each ../shared/data folder), the scikit-learn sets, and bad input."""

import numpy as np
import pytest

from vijax.data import shared_data_path
from vijax.data._uci import (
    DATASETS,
    check_features,
    dataset_available,
    load_binary_dataset,
    load_breast_cancer,
    load_digits_3v5,
)

# name -> (train rows, test rows, dim, train (-1, +1) counts, test (-1, +1) counts), from SOURCE.md
SHARED = {
    "sonar": (165, 43, 60, (77, 88), (20, 23)),
    "ionosphere": (280, 71, 34, (180, 100), (45, 26)),
    "usps_3v5": (767, 773, 256, (361, 406), None),
}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_splits(name):
    if not dataset_available(name):
        pytest.skip(f"{name} is not in ../shared/data")
    d = load_binary_dataset(name)
    ntr, nte, dim, ctr, cte = SHARED[name]
    assert d.x_train.shape == (ntr, dim) and d.x_test.shape == (nte, dim)
    assert (np.sum(d.y_train == -1), np.sum(d.y_train == 1)) == ctr
    if cte is not None:
        assert (np.sum(d.y_test == -1), np.sum(d.y_test == 1)) == cte
    d01 = load_binary_dataset(name, labels="01")
    np.testing.assert_array_equal(d01.y_train, (d.y_train > 0).astype(int))
    assert d01.y_train.dtype.kind == "i"


def test_usps_is_digits_3_and_5():
    if not dataset_available("usps_3v5"):
        pytest.skip("usps is not in ../shared/data")
    d = load_binary_dataset("usps_3v5")
    assert d.x_train.min() >= -1 and d.x_train.max() <= 1
    # the +1 class comes first (threes), as in the reference code
    assert np.all(d.y_train[:406] == 1) and np.all(d.y_train[406:] == -1)


def test_sklearn_sets_every_user_has():
    b = load_breast_cancer()
    assert b.x_train.shape[1] == 30 and len(b.y_train) + len(b.y_test) == 569
    np.testing.assert_allclose(b.x_train.mean(0), 0, atol=1e-10)
    # stratified: the class ratio of the test set is that of the data to within one case
    assert abs(np.sum(b.y_test == 1) - 0.2 * 357) <= 1
    d = load_digits_3v5(labels="01")
    assert d.x_train.shape[1] == 64 and len(d.y_train) + len(d.y_test) == 365
    assert set(np.unique(d.y_train)) == {0, 1} and d.x_train.min() >= -1 and d.x_train.max() <= 1
    # seeded: the same seed gives the same split, another seed another
    np.testing.assert_array_equal(load_digits_3v5(seed=3).x_test, load_digits_3v5(seed=3).x_test)
    assert not np.array_equal(load_digits_3v5(seed=3).x_test, load_digits_3v5(seed=4).x_test)


def test_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        check_features(np.array([[0.0, np.nan]]), "x_train")
    with pytest.raises(ValueError, match="x_train"):
        check_features(np.array([[0.0, np.inf]]), "x_train")
    with pytest.raises(ValueError, match="'iris'"):
        load_binary_dataset("iris")
    with pytest.raises(ValueError, match="labels"):
        load_binary_dataset("digits_3v5", labels="bool")
    assert "breast_cancer" in DATASETS and dataset_available("breast_cancer")


def test_missing_shared_data_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("VIJAX_SHARED_DATA", str(tmp_path))
    assert shared_data_path("sonar", "sonar.all-data-tra.csv") is None
    assert not dataset_available("sonar")
    with pytest.raises(FileNotFoundError, match="sonar"):
        load_binary_dataset("sonar")


@pytest.mark.parametrize(
    "text, message",
    [
        ("0.1,0.2,1\n0.3,-1\n", r"x\.csv: .*column"),  # a short line: no silent re-alignment
        ("0.1,0.2,1\n0.3,abc,-1\n", r"x\.csv: .*abc"),
        ("0.1,0.2,1\n0.3,0.4,2\n", r"x\.csv, data row 2: .*label 2\.0"),
        ("0.1,nan,1\n", r"x\.csv, data row 1: a non-finite value"),
    ],
)
def test_labelled_csv_reader_names_file_and_row(tmp_path, text, message):
    from vijax.data._uci import read_labelled_csv

    path = tmp_path / "x.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_labelled_csv(path)
    path.write_text("0.1,0.2,1\n0.3,0.4,-1\n")
    x, y = read_labelled_csv(path)
    assert x.shape == (2, 2) and y.tolist() == [1.0, -1.0]
