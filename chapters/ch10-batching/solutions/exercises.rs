//! Reference solutions for chapter 10's exercises.

/// Exercise 1: letting go of a shared block.
pub fn release(refs: &mut [u32], free: &mut Vec<usize>, block: usize) -> bool {
    refs[block] -= 1;
    if refs[block] == 0 {
        free.push(block);
        return true;
    }
    false
}

/// Exercise 2: the rows of the next step.
pub fn step_rows(pending: &[usize], budget: usize) -> Vec<usize> {
    let mut rows = vec![0; pending.len()];
    let mut left = budget;
    for decode in [true, false] {
        for (i, &p) in pending.iter().enumerate() {
            if (p == 1) == decode && p > 0 {
                rows[i] = p.min(left);
                left -= rows[i];
            }
        }
    }
    rows
}

/// Exercise 3: the keys of a prompt's blocks.
pub fn block_keys(tokens: &[u32], block_size: usize) -> Vec<u64> {
    let mut keys: Vec<u64> = Vec::new();
    for block in tokens.chunks_exact(block_size) {
        keys.push(crate::prefix::block_key(keys.last().copied(), block));
    }
    keys
}

/// Exercise 4: whom to preempt.
pub fn choose_victim(running: &[(usize, bool)], for_id: usize) -> Option<usize> {
    running
        .iter()
        .filter(|&&(id, has_row)| id != for_id && !has_row)
        .map(|&(id, _)| id)
        .max()
        .filter(|&v| v > for_id)
}
