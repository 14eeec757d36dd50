use super::*;

fn running(id: usize, tokens: usize, computed: usize, blocks: usize) -> SeqState {
    SeqState {
        id,
        running: true,
        tokens,
        computed,
        blocks,
        freeable: blocks,
    }
}

fn waiting(id: usize, tokens: usize) -> SeqState {
    SeqState {
        id,
        running: false,
        tokens,
        computed: 0,
        blocks: 0,
        freeable: 0,
    }
}

fn limits(free_blocks: usize, max_batch_tokens: usize) -> Limits {
    Limits {
        block_size: 4,
        free_blocks,
        max_batch_tokens,
        max_seqs: 8,
    }
}

#[test]
fn decode_rows_come_first_and_prefill_fills_the_rest_of_the_budget() {
    let seqs = [running(0, 6, 5, 2), waiting(2, 10), running(1, 3, 2, 1)];
    let p = plan(&seqs, limits(10, 6));
    let c = |id, start, len| Chunk { id, start, len };
    assert_eq!(p.rows, [c(0, 5, 1), c(1, 2, 1), c(2, 0, 4)]);
    assert_eq!(p.admitted, [2]);
    assert!(p.preempted.is_empty());
    assert_eq!(p.tokens(), 6, "the budget is filled");
}

#[test]
fn a_running_prefill_continues_before_anyone_new_is_admitted() {
    let seqs = [running(0, 20, 8, 2), waiting(1, 4)];
    let p = plan(&seqs, limits(10, 8));
    assert_eq!(
        p.rows,
        [Chunk {
            id: 0,
            start: 8,
            len: 8
        }]
    );
    assert!(p.admitted.is_empty(), "the budget went to the older prompt");
}

#[test]
fn nobody_overtakes_the_oldest_waiting_request() {
    // request 0 needs 5 blocks, only 3 are free; request 1 would fit, but must wait its turn
    let p = plan(&[waiting(0, 20), waiting(1, 4)], limits(3, 64));
    assert!(p.rows.is_empty() && p.admitted.is_empty());
}

#[test]
fn out_of_blocks_the_youngest_gives_its_blocks_back() {
    // three decoding sequences, each at a block boundary (needs a new block), none free
    let seqs = [
        running(0, 9, 8, 2),
        running(1, 9, 8, 2),
        running(2, 5, 4, 1),
    ];
    let p = plan(&seqs, limits(0, 64));
    assert_eq!(p.preempted, [2, 1], "youngest first, until the oldest fits");
    assert_eq!(
        p.rows,
        [Chunk {
            id: 0,
            start: 8,
            len: 1
        }]
    );
    // its own blocks are not counted twice: 1 (seq 2) + 2 (seq 1) freed, 1 used by seq 0
}

#[test]
fn the_oldest_is_never_preempted_for_a_younger_one() {
    let seqs = [running(0, 9, 8, 2), running(1, 9, 8, 2)];
    assert_eq!(victim(&seqs, 1, &[]), None, "only older sequences are left");
    assert_eq!(victim(&seqs, 0, &[]), Some(1));
    assert_eq!(victim(&seqs, 0, &[1]), None, "1 already has its row");
}
