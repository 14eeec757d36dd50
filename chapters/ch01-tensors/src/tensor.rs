//! `Tensor`: a shape, strides and an offset over shared `f32` storage.
//!
//! Element `[i0, i1, ..., in]` lives at `storage[offset + i0*strides[0] + ... + in*strides[n]]`.
//! That one formula is the whole trick: a transpose swaps two strides, a narrow moves the
//! offset and shrinks one dimension, a reshape of a contiguous tensor computes new
//! strides — and none of them touch a single float. Only `contiguous()` (and `to_vec()`)
//! copy, and only when the layout really is scattered.

use crate::Error;
use crate::ops;
use crate::storage::Storage;
use std::fmt;
use std::sync::Arc;

// ANCHOR: tensor
/// An n-dimensional array of `f32`: a view (shape, strides, offset) into shared storage.
/// Cloning a `Tensor` clones the view, never the numbers.
#[derive(Clone)]
pub struct Tensor {
    storage: Arc<Storage>, // the flat buffer, shared by every view of it
    shape: Vec<usize>,     // size of each dimension, outermost first
    strides: Vec<usize>,   // elements to skip in `storage` to step 1 along each dimension
    offset: usize,         // index in `storage` of element [0, 0, ..., 0]
}
// ANCHOR_END: tensor

// ANCHOR: row_major_strides
/// The strides of a freshly allocated, row-major tensor: the last dimension is
/// contiguous (stride 1) and each earlier stride is the product of the sizes after it.
/// `[2, 3, 4]` -> `[12, 4, 1]`.
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut step = 1;
    for d in (0..shape.len()).rev() {
        strides[d] = step;
        step *= shape[d];
    }
    strides
}
// ANCHOR_END: row_major_strides

impl Tensor {
    /// A tensor that owns `data`, laid out row-major with the given shape.
    pub fn from_vec(data: Vec<f32>, shape: &[usize]) -> Result<Tensor, Error> {
        let numel = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if numel != Some(data.len()) {
            return Err(Error::Shape(format!(
                "{} values do not fill shape {shape:?}",
                data.len()
            )));
        }
        Ok(Tensor::with_storage(Storage::Owned(data), shape))
    }

    /// A row-major tensor of zeros.
    pub fn zeros(shape: &[usize]) -> Tensor {
        let numel = shape.iter().product();
        Tensor::with_storage(Storage::Owned(vec![0.0; numel]), shape)
    }

    /// A row-major tensor over all of `storage` (whose length the caller checked).
    pub(crate) fn with_storage(storage: Storage, shape: &[usize]) -> Tensor {
        Tensor {
            storage: Arc::new(storage),
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
            offset: 0,
        }
    }

    // ANCHOR: as_strided
    /// A new view of the same storage with any shape, strides and offset: the general
    /// form of every view (`transpose`, `narrow` and `row` are special cases that stay in
    /// bounds by construction). It fails if the view would reach an element outside the
    /// storage, so a view can never read out of bounds.
    pub fn as_strided(
        &self,
        shape: &[usize],
        strides: &[usize],
        offset: usize,
    ) -> Result<Tensor, Error> {
        if shape.len() != strides.len() {
            return Err(Error::Shape(format!(
                "shape {shape:?} and strides {strides:?} differ in rank"
            )));
        }
        let len = self.storage.as_slice().len();
        if shape.iter().all(|&s| s > 0) {
            // The farthest element: offset + Σ (size-1)·stride. Checked, so huge strides fail.
            let last = shape
                .iter()
                .zip(strides)
                .try_fold(offset, |acc, (&s, &st)| {
                    (s - 1).checked_mul(st).and_then(|x| acc.checked_add(x))
                });
            if last.is_none_or(|last| last >= len) {
                return Err(Error::Shape(format!(
                    "view shape {shape:?} strides {strides:?} offset {offset} reaches past storage of {len} elements"
                )));
            }
        }
        Ok(Tensor {
            storage: Arc::clone(&self.storage),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        })
    }
    // ANCHOR_END: as_strided

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Index in the storage of element `[0, 0, ..., 0]`.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements: the product of the shape (1 for a 0-d scalar).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// `(rows, cols)` of a 2-D tensor, or an error naming the actual shape.
    pub fn dims2(&self) -> Result<(usize, usize), Error> {
        match self.shape[..] {
            [r, c] => Ok((r, c)),
            _ => Err(Error::Shape(format!(
                "expected a 2-D tensor, got shape {:?}",
                self.shape
            ))),
        }
    }

    /// True when two tensors view the same storage buffer (so no data was copied).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// True when the numbers live in a memory-mapped file rather than on the heap.
    pub fn is_mapped(&self) -> bool {
        self.storage.is_mapped()
    }

    // ANCHOR: is_contiguous
    /// True when the elements sit in storage in row-major order with no gaps, so the
    /// tensor is one plain slice. Dimensions of size 1 may have any stride.
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&size, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            expected *= size;
        }
        true
    }
    // ANCHOR_END: is_contiguous

    /// The elements as one slice, when the tensor is contiguous; `None` otherwise.
    pub fn as_slice(&self) -> Option<&[f32]> {
        if self.numel() == 0 {
            return Some(&[]);
        }
        self.is_contiguous()
            .then(|| &self.storage.as_slice()[self.offset..self.offset + self.numel()])
    }

    // ANCHOR: get
    /// The element at `index`.
    ///
    /// # Panics
    /// If `index` has the wrong rank or is out of bounds — like indexing a slice.
    pub fn get(&self, index: &[usize]) -> f32 {
        assert_eq!(
            index.len(),
            self.shape.len(),
            "index {index:?} for shape {:?}",
            self.shape
        );
        let mut pos = self.offset;
        for ((&i, &size), &stride) in index.iter().zip(&self.shape).zip(&self.strides) {
            assert!(
                i < size,
                "index {index:?} out of bounds for shape {:?}",
                self.shape
            );
            pos += i * stride;
        }
        self.storage.as_slice()[pos]
    }
    // ANCHOR_END: get

    /// All elements in logical row-major order, whatever the layout (always a copy).
    pub fn to_vec(&self) -> Vec<f32> {
        if let Some(slice) = self.as_slice() {
            return slice.to_vec();
        }
        // Walk the index like an odometer: bump the last digit, carry into earlier ones.
        let data = self.storage.as_slice();
        let rank = self.shape.len();
        let mut out = Vec::with_capacity(self.numel()); // (numel,)
        let mut index = vec![0; rank];
        let mut pos = self.offset;
        loop {
            out.push(data[pos]);
            let mut d = rank;
            loop {
                if d == 0 {
                    return out;
                }
                d -= 1;
                index[d] += 1;
                pos += self.strides[d];
                if index[d] < self.shape[d] {
                    break;
                }
                pos -= self.strides[d] * self.shape[d];
                index[d] = 0;
            }
        }
    }

    /// This tensor laid out row-major without gaps: itself (sharing storage) when it
    /// already is, otherwise a fresh copy.
    pub fn contiguous(&self) -> Tensor {
        if self.is_contiguous() {
            return self.clone();
        }
        Tensor::with_storage(Storage::Owned(self.to_vec()), &self.shape)
    }

    // ANCHOR: views
    /// The same elements under a new shape with the same element count. A view when the
    /// tensor is contiguous; otherwise the elements are first copied into row-major
    /// order (a transposed matrix cannot be re-read with new row-major strides).
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor, Error> {
        let numel: usize = shape.iter().product();
        if numel != self.numel() {
            return Err(Error::Shape(format!(
                "cannot reshape {:?} ({} elements) into {shape:?} ({numel} elements)",
                self.shape,
                self.numel()
            )));
        }
        let base = self.contiguous();
        Ok(Tensor {
            shape: shape.to_vec(),
            strides: row_major_strides(shape),
            ..base
        })
    }
    // ANCHOR_END: views

    // ANCHOR: views_no_copy
    /// Swaps dimensions `d0` and `d1`: swap their sizes and their strides. No copy.
    ///
    /// # Panics
    /// If `d0` or `d1` is not a dimension of the tensor.
    pub fn transpose(&self, d0: usize, d1: usize) -> Tensor {
        let mut t = self.clone();
        t.shape.swap(d0, d1);
        t.strides.swap(d0, d1);
        t
    }

    /// Elements `start..start + len` along `dim`: move the offset, shrink one size. No copy.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor, Error> {
        let size = *self.shape.get(dim).ok_or_else(|| {
            Error::Shape(format!("narrow: dimension {dim} of shape {:?}", self.shape))
        })?;
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::Shape(format!(
                "narrow: {start}..{start}+{len} is outside dimension {dim} of size {size}"
            )));
        }
        let mut t = self.clone();
        t.offset += start * self.strides[dim];
        t.shape[dim] = len;
        Ok(t)
    }

    /// Row `i` of a 2-D tensor as a 1-D view (in general: drops dimension 0 at index `i`).
    ///
    /// # Panics
    /// If the tensor is 0-d or `i` is out of bounds.
    pub fn row(&self, i: usize) -> Tensor {
        assert!(
            !self.shape.is_empty() && i < self.shape[0],
            "row {i} of shape {:?}",
            self.shape
        );
        Tensor {
            storage: Arc::clone(&self.storage),
            shape: self.shape[1..].to_vec(),
            strides: self.strides[1..].to_vec(),
            offset: self.offset + i * self.strides[0],
        }
    }
    // ANCHOR_END: views_no_copy

    /// Matrix product `self (m, k) · other (k, n) -> (m, n)` with the cache-blocked kernel.
    /// Non-contiguous operands (a transposed view, say) are copied to row-major first.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor, Error> {
        let (m, k) = self.dims2()?;
        let (k2, n) = other.dims2()?;
        if k != k2 {
            return Err(Error::Shape(format!(
                "matmul: ({m}, {k}) · ({k2}, {n}): inner dimensions differ"
            )));
        }
        let (a, b) = (self.contiguous(), other.contiguous());
        let mut out = vec![0.0; m * n]; // (m, n)
        let (Some(a), Some(b)) = (a.as_slice(), b.as_slice()) else {
            unreachable!("contiguous() returns a contiguous tensor")
        };
        ops::matmul_blocked(&mut out, a, b, m, k, n);
        Tensor::from_vec(out, &[m, n])
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("offset", &self.offset)
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

/// Nested brackets, one row of the last dimension per line: `[[0, 1, 2],\n [3, 4, 5]]`.
/// A precision (`{:.2}`) applies to every element.
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn rec(t: &Tensor, depth: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if t.shape.is_empty() {
                let v = t.get(&[]);
                return match f.precision() {
                    Some(p) => write!(f, "{v:.p$}"),
                    None => write!(f, "{v}"),
                };
            }
            write!(f, "[")?;
            for i in 0..t.shape[0] {
                if i > 0 {
                    let newline = t.shape.len() > 1;
                    write!(f, ",{}", if newline { "\n" } else { " " })?;
                    if newline {
                        write!(f, "{:width$}", "", width = depth + 1)?;
                    }
                }
                rec(&t.row(i), depth + 1, f)?;
            }
            write!(f, "]")
        }
        rec(self, 0, f)
    }
}
