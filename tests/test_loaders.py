"""Loaders on small synthetic files in every supported layout (.mat v5 and v7.3, .npz); the IDX
reader and the MNIST-derived sets: tests/test_mnist_data.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from specrage_jax.data import (
    labels_to_indices,
    load_file,
    load_mat,
    load_npz,
)
from specrage_jax.data.loaders import is_hdf5_file

N = 12
RNG = np.random.default_rng(0)
VIEW_A = RNG.random((N, 5))
VIEW_B = RNG.integers(0, 7, size=(N, 3)).astype(np.uint8)
VIEW_C = RNG.random((N, 4))
LABELS_1_BASED = np.repeat([1, 2, 3], 4)
EXPECTED_LABELS = LABELS_1_BASED - 1


def cell(*arrays) -> np.ndarray:
    """A 1 x V MATLAB cell (object array) for scipy.io.savemat."""
    out = np.empty((1, len(arrays)), dtype=object)
    for i, array in enumerate(arrays):
        out[0, i] = array
    return out


def save_mat(path: Path, **variables) -> Path:
    scipy.io.savemat(path, variables)
    return path


def assert_views(data, *expected):
    assert data.n_views == len(expected)
    for got, want in zip(data.views, expected):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, np.asarray(want, dtype=np.float32))


# --- .mat v5: view layouts ---------------------------------------------------------------------


@pytest.mark.parametrize("key", ["X", "fea", "data", "Xs"])
def test_cell_of_views_under_known_keys(tmp_path, key):
    path = save_mat(tmp_path / "cellfile.mat", **{key: cell(VIEW_A, VIEW_B, VIEW_C), "Y": LABELS_1_BASED[:, None]})
    data = load_mat(path)
    assert_views(data, VIEW_A, VIEW_B, VIEW_C)
    np.testing.assert_array_equal(data.labels, EXPECTED_LABELS)
    assert data.name == "cellfile" and data.view_names == ("view0", "view1", "view2")


def test_cell_stored_as_column_v_by_1(tmp_path):
    column = cell(VIEW_A, VIEW_C).T  # V x 1
    path = save_mat(tmp_path / "col.mat", X=column, Y=LABELS_1_BASED)
    assert_views(load_mat(path), VIEW_A, VIEW_C)


@pytest.mark.parametrize("prefix", ["X", "x", "view", "X_"])
def test_per_view_keys_sorted_numerically(tmp_path, prefix):
    path = save_mat(
        tmp_path / "keys.mat",
        **{f"{prefix}10": VIEW_C, f"{prefix}2": VIEW_B, f"{prefix}1": VIEW_A, "Y": LABELS_1_BASED},
    )
    assert_views(load_mat(path), VIEW_A, VIEW_B, VIEW_C)


def test_features_by_samples_and_mixed_orientation(tmp_path):
    path = save_mat(tmp_path / "t.mat", X1=VIEW_A.T, X2=VIEW_B, X3=VIEW_C.T, gt=LABELS_1_BASED)
    assert_views(load_mat(path), VIEW_A, VIEW_B, VIEW_C)


def test_square_view_is_taken_as_samples_by_features(tmp_path):
    square = RNG.random((N, N))
    path = save_mat(tmp_path / "sq.mat", X=cell(square, VIEW_A.T), Y=LABELS_1_BASED)
    assert_views(load_mat(path), square, VIEW_A)


def test_sparse_views_are_densified(tmp_path):
    sparse_a = scipy.sparse.csr_matrix(np.where(VIEW_A > 0.5, VIEW_A, 0.0))
    sparse_c_t = scipy.sparse.csc_matrix(np.where(VIEW_C > 0.5, VIEW_C, 0.0).T)
    path = save_mat(tmp_path / "sp.mat", X=cell(sparse_a, VIEW_B, sparse_c_t), Y=LABELS_1_BASED)
    assert_views(load_mat(path), sparse_a.toarray(), VIEW_B, sparse_c_t.toarray().T)


def test_views_selects_and_orders_a_subset(tmp_path):
    path = save_mat(tmp_path / "sel.mat", X=cell(VIEW_A, VIEW_B, VIEW_C), Y=LABELS_1_BASED)
    data = load_mat(path, views=(2, 0))
    assert_views(data, VIEW_C, VIEW_A)
    assert data.view_names == ("view2", "view0")
    with pytest.raises(ValueError, match=r"sel\.mat.*views \[3\] out of range.*3 views"):
        load_mat(path, views=(0, 3))


def test_view_names_from_feas_cell(tmp_path):
    names = np.empty((1, 3), dtype=object)
    names[0, :] = ["pixel", "fourier", "profile"]
    path = save_mat(tmp_path / "named.mat", X=cell(VIEW_A, VIEW_B, VIEW_C), Y=LABELS_1_BASED, feas=names)
    assert load_mat(path, views=(0, 2)).view_names == ("pixel", "profile")


def test_explicit_view_key_and_label_key(tmp_path):
    path = save_mat(tmp_path / "odd.mat", feats=cell(VIEW_A, VIEW_B), cls=LABELS_1_BASED, Y=np.zeros(3))
    data = load_mat(path, view_key="feats", label_key="cls")
    assert_views(data, VIEW_A, VIEW_B)
    np.testing.assert_array_equal(data.labels, EXPECTED_LABELS)


# --- .mat v5: labels ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["Y", "gt", "truth", "labels", "label", "y", "truelabel", "gnd"])
def test_every_label_key(tmp_path, key):
    path = save_mat(tmp_path / "lab.mat", X=cell(VIEW_A), **{key: LABELS_1_BASED})
    np.testing.assert_array_equal(load_mat(path).labels, EXPECTED_LABELS)


@pytest.mark.parametrize("shape", [(N,), (N, 1), (1, N)])
def test_label_shapes_are_flattened(tmp_path, shape):
    path = save_mat(tmp_path / "shape.mat", X=cell(VIEW_A), Y=LABELS_1_BASED.reshape(shape))
    np.testing.assert_array_equal(load_mat(path).labels, EXPECTED_LABELS)


def test_uint8_labels_with_zero_do_not_wrap(tmp_path):
    raw = np.repeat(np.array([0, 1, 2], dtype=np.uint8), 4)[:, None]
    path = save_mat(tmp_path / "u8.mat", X=cell(VIEW_A), Y=raw)
    assert scipy.io.loadmat(path)["Y"].dtype == np.uint8
    np.testing.assert_array_equal(load_mat(path).labels, raw.ravel().astype(np.int64))


@pytest.mark.parametrize(
    "raw, expected",
    [
        ([0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2]),
        ([1, 1, 2, 2, 3, 3], [0, 0, 1, 1, 2, 2]),
        ([30, 10, 20, 10, -5, 30], [3, 1, 2, 1, 0, 3]),
        ([2.0, 7.0, 2.0, 7.0, 9.0, 9.0], [0, 1, 0, 1, 2, 2]),
        (np.array([255, 0, 1, 0, 255, 1], dtype=np.uint8), [2, 0, 1, 0, 2, 1]),
    ],
)
def test_labels_to_indices_maps_sorted_unique_values(raw, expected):
    mapped = labels_to_indices(np.asarray(raw))
    assert mapped.dtype == np.int64
    np.testing.assert_array_equal(mapped, expected)


def test_arbitrary_label_values_in_a_file(tmp_path):
    raw = np.array([7, 7, 3, 3, 11, 11, 7, 3, 11, 7, 3, 11], dtype=np.uint8)
    path = save_mat(tmp_path / "arb.mat", X=cell(VIEW_A), y=raw[None, :])
    np.testing.assert_array_equal(load_mat(path).labels, labels_to_indices(raw))
    assert set(load_mat(path).labels.tolist()) == {0, 1, 2}


# --- .mat v5: errors ---------------------------------------------------------------------------


def test_unknown_layout_names_the_file_and_the_keys_found(tmp_path):
    path = save_mat(tmp_path / "weird.mat", features=VIEW_A, target=LABELS_1_BASED)
    with pytest.raises(ValueError, match=r"weird\.mat: no views found.*features: \(12, 5\).*target"):
        load_mat(path)


def test_missing_labels_name_the_keys_tried(tmp_path):
    path = save_mat(tmp_path / "nolab.mat", X=cell(VIEW_A))
    with pytest.raises(ValueError, match=r"nolab\.mat: no labels found; tried keys Y, gt, truth"):
        load_mat(path)


def test_mismatched_sample_counts_name_the_shapes(tmp_path):
    path = save_mat(tmp_path / "bad.mat", X1=VIEW_A, X2=RNG.random((N - 2, 3)), Y=LABELS_1_BASED)
    with pytest.raises(ValueError, match=r"bad\.mat: key 'X2' has shape \(10, 3\).*12 labels.*'X1' \(12, 5\)"):
        load_mat(path)


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.mat"):
        load_mat(tmp_path / "nothere.mat")
    with pytest.raises(FileNotFoundError, match="nothere.npz"):
        load_file(tmp_path / "nothere.npz")
    (tmp_path / "data.csv").write_text("1,2\n")
    with pytest.raises(ValueError, match=r"data\.csv.*expected \.mat or \.npz"):
        load_file(tmp_path / "data.csv")


def test_labels_in_a_cell_of_class_names_or_of_one_copy_per_view(tmp_path):
    names = cell(*[("ant", "bee", "cat")[v - 1] for v in LABELS_1_BASED])  # a MATLAB cellstr
    path = save_mat(tmp_path / "ln.mat", X=cell(VIEW_A), Y=names)
    np.testing.assert_array_equal(load_mat(path).labels, EXPECTED_LABELS)
    mixed = save_mat(tmp_path / "lx.mat", X=cell(VIEW_A), Y=cell("ant", LABELS_1_BASED))
    with pytest.raises(ValueError, match=r"lx\.mat: labels 'Y' must be a vector of numbers or class names"):
        load_mat(mixed)
    path = save_mat(tmp_path / "lc.mat", data=cell(VIEW_A, VIEW_C), truelabel=cell(LABELS_1_BASED, LABELS_1_BASED))
    np.testing.assert_array_equal(load_mat(path).labels, EXPECTED_LABELS)
    other = LABELS_1_BASED.copy()
    other[0] = 3
    path = save_mat(tmp_path / "ld.mat", data=cell(VIEW_A, VIEW_C), truelabel=cell(LABELS_1_BASED, other))
    with pytest.raises(ValueError, match=r"ld\.mat: labels 'truelabel' is a cell of 2 .*entries \[1\] differ"):
        load_mat(path)


def test_known_keys_match_up_to_case(tmp_path):
    path = save_mat(tmp_path / "case.mat", Data=cell(VIEW_A, VIEW_C), GT=LABELS_1_BASED)
    data = load_mat(path)
    assert_views(data, VIEW_A, VIEW_C)
    np.testing.assert_array_equal(data.labels, EXPECTED_LABELS)
    with pytest.raises(ValueError, match="no labels found; tried keys gt"):
        load_mat(path, label_key="gt")  # a key the caller names is matched exactly


def test_label_matrix_is_rejected(tmp_path):
    path = save_mat(tmp_path / "lm.mat", X=cell(VIEW_A), Y=np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"lm\.mat: labels 'Y' must be .*got shape \(3, 4\)"):
        load_mat(path)


# --- .mat v7.3 (HDF5) --------------------------------------------------------------------------


def write_matlab_v73(path: Path, variables: dict) -> Path:
    """Writes variables the way MATLAB -v7.3 does: a 512-byte MATLAB header as the HDF5 user
    block, arrays transposed, cells as datasets of object references into #refs#, sparse
    matrices as groups (data, ir, jc) with a MATLAB_sparse row-count attribute."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w", userblock_size=512) as h5file:
        refs = h5file.create_group("#refs#")
        counter = iter(range(10_000))

        def write(parent, name, value):
            if isinstance(value, list):
                children = []
                for item in value:
                    child = f"r{next(counter)}"
                    write(refs, child, item)
                    children.append(refs[child].ref)
                dataset = parent.create_dataset(name, data=np.array(children, dtype=h5py.ref_dtype)[:, None])
                dataset.attrs["MATLAB_class"] = np.bytes_("cell")
            elif isinstance(value, str):
                dataset = parent.create_dataset(name, data=np.array([[ord(c)] for c in value], dtype=np.uint16))
                dataset.attrs["MATLAB_class"] = np.bytes_("char")
            elif scipy.sparse.issparse(value):
                csc = scipy.sparse.csc_matrix(value)
                group = parent.create_group(name)
                group.create_dataset("data", data=csc.data)
                group.create_dataset("ir", data=csc.indices.astype(np.uint64))
                group.create_dataset("jc", data=csc.indptr.astype(np.uint64))
                group.attrs["MATLAB_class"] = np.bytes_("double")
                group.attrs["MATLAB_sparse"] = np.uint64(csc.shape[0])
            else:
                array = np.atleast_2d(np.asarray(value, dtype=np.float64))
                dataset = parent.create_dataset(name, data=array.T)
                dataset.attrs["MATLAB_class"] = np.bytes_("double")

        for name, value in variables.items():
            write(h5file, name, value)
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."
    with open(path, "r+b") as handle:
        handle.write(header.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02" + b"IM")
    return path


def test_v73_file_matches_the_v5_file(tmp_path):
    sparse_c = scipy.sparse.random(N, 4, density=0.4, random_state=1, format="csc")
    square = RNG.random((N, N))  # only a correct HDF5 transpose gets a square view right
    path = write_matlab_v73(
        tmp_path / "big.mat",
        {
            "X": [VIEW_A, VIEW_B.T.astype(np.float64), sparse_c, square],
            "Y": LABELS_1_BASED[:, None],
            "feas": ["pix", "fac", "sparse", "square"],
        },
    )
    assert is_hdf5_file(path)
    with pytest.raises(NotImplementedError):
        scipy.io.loadmat(path)  # what the loader has to route around
    data = load_mat(path)
    assert_views(data, VIEW_A, VIEW_B, sparse_c.toarray(), square)
    np.testing.assert_array_equal(data.labels, EXPECTED_LABELS)
    assert data.view_names == ("pix", "fac", "sparse", "square")
    assert load_mat(path, views=(2,)).view_dims == (4,)


def test_v73_per_view_keys_and_transposed_views(tmp_path):
    path = write_matlab_v73(tmp_path / "keys73.mat", {"X1": VIEW_A.T, "X2": VIEW_C, "gt": LABELS_1_BASED[None, :]})
    data = load_file(path)
    assert_views(data, VIEW_A, VIEW_C)
    np.testing.assert_array_equal(data.labels, EXPECTED_LABELS)


# --- .npz --------------------------------------------------------------------------------------


def test_npz_views_and_labels(tmp_path):
    path = tmp_path / "noisy.npz"
    np.savez(path, view_0=VIEW_A, view_1=VIEW_B, view_2=VIEW_C, labels=LABELS_1_BASED.astype(np.uint8))
    data = load_file(path)
    assert_views(data, VIEW_A, VIEW_B, VIEW_C)
    np.testing.assert_array_equal(data.labels, EXPECTED_LABELS)
    assert data.name == "noisy"
    assert_views(load_npz(path, views=(1,)), VIEW_B)
    np.savez(tmp_path / "numbered.npz", X1=VIEW_A, X2=VIEW_C, y=LABELS_1_BASED)  # as a .mat file's keys
    assert_views(load_npz(tmp_path / "numbered.npz"), VIEW_A, VIEW_C)


def test_npz_errors(tmp_path):
    np.savez(tmp_path / "noviews.npz", a=VIEW_A, labels=LABELS_1_BASED)
    with pytest.raises(ValueError, match=r"noviews\.npz: no views found.*a: \(12, 5\)"):
        load_npz(tmp_path / "noviews.npz")
    np.savez(tmp_path / "gap.npz", view_0=VIEW_A, view_2=VIEW_C, labels=LABELS_1_BASED)
    with pytest.raises(ValueError, match=r"gap\.npz.*without gaps"):
        load_npz(tmp_path / "gap.npz")
    np.savez(tmp_path / "nolabels.npz", view_0=VIEW_A)
    with pytest.raises(ValueError, match=r"nolabels\.npz: no labels found"):
        load_npz(tmp_path / "nolabels.npz")
    np.savez(tmp_path / "short.npz", view_0=VIEW_A, view_1=VIEW_B[:5], labels=LABELS_1_BASED)
    with pytest.raises(ValueError, match=r"short\.npz: key 'view_1' has shape \(5, 3\)"):
        load_npz(tmp_path / "short.npz")
    ragged = np.empty(2, dtype=object)
    ragged[:] = [VIEW_A, VIEW_C]  # a list of views of unequal widths is saved as Python objects
    np.savez(tmp_path / "ragged.npz", views=ragged, labels=LABELS_1_BASED)
    with pytest.raises(ValueError, match=r"ragged\.npz: key 'views' holds Python objects.*view_0=x0"):
        load_npz(tmp_path / "ragged.npz")


# --- incomplete data: a stored view mask ------------------------------------------------------


def test_a_stored_view_mask_turns_missing_rows_into_nan(tmp_path):
    mask = np.ones((N, 3), bool)
    mask[[1, 5], 0] = False
    mask[7, 2] = False
    np.savez(tmp_path / "inc.npz", view_0=VIEW_A, view_1=VIEW_B, view_2=VIEW_C, labels=LABELS_1_BASED, mask=mask)
    data = load_file(tmp_path / "inc.npz")
    np.testing.assert_array_equal(data.present, mask)
    assert np.isnan(data.views[0][[1, 5]]).all() and np.isfinite(data.views[0][0]).all()
    np.testing.assert_array_equal(load_npz(tmp_path / "inc.npz", views=(2, 0)).present, mask[:, [2, 0]])
    as_mat = save_mat(tmp_path / "inc.mat", X=cell(VIEW_A, VIEW_B, VIEW_C), Y=LABELS_1_BASED, mask=mask.T.astype(float))
    np.testing.assert_array_equal(load_mat(as_mat).present, mask)  # views x samples, 0/1 numbers


def test_a_bad_stored_view_mask_names_the_file_and_the_problem(tmp_path):
    np.savez(tmp_path / "shape.npz", view_0=VIEW_A, view_1=VIEW_B, labels=LABELS_1_BASED, mask=np.ones((N, 3)))
    with pytest.raises(ValueError, match=r"shape\.npz: the view mask must be \(n_samples, n_views\) = \(12, 2\)"):
        load_npz(tmp_path / "shape.npz")
    np.savez(tmp_path / "values.npz", view_0=VIEW_A, view_1=VIEW_B, labels=LABELS_1_BASED, mask=np.full((N, 2), 2))
    with pytest.raises(ValueError, match=r"values\.npz: the view mask must hold booleans or 0/1"):
        load_npz(tmp_path / "values.npz")
    empty = np.ones((N, 2), bool)
    empty[4] = False
    np.savez(tmp_path / "empty.npz", view_0=VIEW_A, view_1=VIEW_B, labels=LABELS_1_BASED, mask=empty)
    with pytest.raises(ValueError, match="sample 4 has every view missing"):
        load_npz(tmp_path / "empty.npz")
