//! How `read_file` pages a text (docs/spec.md §8: `offset`/`limit` are lines, at most 64 KiB a call):
//! one pure function, so the tool and the run's record of how much of a big note the model read
//! (`run::finish`) agree on every byte.
//!
//! A line longer than one page is read in parts: the page ends inside it and says the
//! `line_byte` to go on from, so no byte of a one-line file is out of reach.

use crate::base::text::floor_boundary;

/// Most bytes one `read_file` call returns; longer files are paged.
pub const READ_PAGE_BYTES: usize = 64 * 1024;

/// Where to start and how far to go, as the model asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageAt {
    /// First line, counting from 1.
    pub offset: usize,
    /// Byte of line `offset` to start at (0: its start); for a line longer than one page.
    pub line_byte: usize,
    /// Most lines.
    pub limit: usize,
}

impl Default for PageAt {
    fn default() -> Self {
        Self {
            offset: 1,
            line_byte: 0,
            limit: usize::MAX,
        }
    }
}

/// One page of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// First and last line shown (1-based; both 0 for an empty text).
    pub first: usize,
    pub last: usize,
    /// The bytes shown: `text[start..end]`.
    pub start: usize,
    pub end: usize,
    /// Lines in the whole text.
    pub total: usize,
    /// Where the next page starts — (line, byte in that line) — when anything is left.
    pub next: Option<(usize, usize)>,
}

/// Why a page cannot be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    #[error("it has {total} lines; offset {offset} is past the end")]
    PastEnd { offset: usize, total: usize },
    #[error("line {offset} has {len} bytes; line_byte {line_byte} is past its end")]
    PastLineEnd {
        offset: usize,
        len: usize,
        line_byte: usize,
    },
}

/// Lines in `text` as `read_file` counts them: a last line without a line break counts.
pub fn line_count(text: &str) -> usize {
    text.split_inclusive('\n').count()
}

/// The page of `text` that `at` asks for, at most `max` bytes (at least one char of a line).
pub fn page(text: &str, at: PageAt, max: usize) -> Result<Page, PageError> {
    let total = line_count(text);
    if total == 0 {
        return Ok(Page {
            first: 0,
            last: 0,
            start: 0,
            end: 0,
            total,
            next: None,
        });
    }
    let offset = at.offset.max(1);
    if offset > total {
        return Err(PageError::PastEnd { offset, total });
    }
    let mut lines = text.split_inclusive('\n');
    let line_start: usize = lines.by_ref().take(offset - 1).map(str::len).sum();
    let mut rest = text[line_start..].split_inclusive('\n');
    let first_line = rest.next().unwrap_or_default();
    if at.line_byte > 0 && at.line_byte >= first_line.len() {
        return Err(PageError::PastLineEnd {
            offset,
            len: first_line.len(),
            line_byte: at.line_byte,
        });
    }
    let skip = floor_boundary(first_line, at.line_byte);
    let start = line_start + skip;
    let max = max.max(4);
    let mut end = start;
    let mut last = offset - 1;
    let mut next = None;
    let pieces = std::iter::once((&first_line[skip..], skip)).chain(rest.map(|l| (l, 0)));
    for (k, (piece, in_line)) in pieces.take(at.limit.max(1)).enumerate() {
        let line = offset + k;
        if end > start && end - start + piece.len() > max {
            next = Some((line, 0));
            break;
        }
        if piece.len() > max {
            let cut = floor_boundary(piece, max);
            end += cut;
            last = line;
            next = Some((line, in_line + cut));
            break;
        }
        end += piece.len();
        last = line;
    }
    if next.is_none() && last < total {
        next = Some((last + 1, 0));
    }
    Ok(Page {
        first: offset,
        last,
        start,
        end,
        total,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(offset: usize, line_byte: usize) -> PageAt {
        PageAt {
            offset,
            line_byte,
            ..PageAt::default()
        }
    }

    /// Follows `next` from the start; returns the pages' bytes in order.
    fn walk(text: &str, max: usize) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        let mut here = at(1, 0);
        loop {
            let p = page(text, here, max).unwrap();
            spans.push((p.start, p.end));
            match p.next {
                Some((offset, line_byte)) => here = at(offset, line_byte),
                None => return spans,
            }
            assert!(spans.len() <= text.len() + 1, "pages move forward");
        }
    }

    #[test]
    fn lines_count_as_read_file_shows_them() {
        assert_eq!(line_count(""), 0);
        assert_eq!(line_count("a"), 1);
        assert_eq!(line_count("a\n"), 1);
        assert_eq!(line_count("a\nb"), 2);
        assert_eq!(line_count("\n\n"), 2);
    }

    #[test]
    fn whole_lines_until_the_page_is_full_then_the_next_offset() {
        let text = "one\ntwo\nthree\n";
        let p = page(text, at(1, 0), 9).unwrap();
        assert_eq!((p.first, p.last, &text[p.start..p.end]), (1, 2, "one\ntwo\n"));
        assert_eq!(p.next, Some((3, 0)));
        let p = page(text, PageAt { limit: 1, ..at(2, 0) }, 100).unwrap();
        assert_eq!((&text[p.start..p.end], p.next), ("two\n", Some((3, 0))));
        assert_eq!(
            page(text, at(4, 0), 100),
            Err(PageError::PastEnd { offset: 4, total: 3 })
        );
    }

    #[test]
    fn a_line_longer_than_a_page_is_read_in_parts() {
        let text = format!("{}\nafter\n", "é".repeat(10));
        let p = page(&text, at(1, 0), 7).unwrap();
        assert_eq!(&text[p.start..p.end], "ééé", "cut at a char boundary");
        assert_eq!(p.next, Some((1, 6)));
        let p = page(&text, at(1, 6), 7).unwrap();
        assert_eq!((&text[p.start..p.end], p.next), ("ééé", Some((1, 12))));
        let p = page(&text, at(1, 18), 100).unwrap();
        assert_eq!((&text[p.start..p.end], p.next), ("é\nafter\n", None));
        assert!(matches!(
            page(&text, at(1, 21), 100),
            Err(PageError::PastLineEnd { .. })
        ));
        let p = page(&text, at(1, 1), 100).unwrap();
        assert_eq!(p.start, 0, "a byte inside a char starts at that char");
    }

    proptest! {
        /// Following `next` from the first page reads every byte once, in order, whatever the
        /// text and the page size.
        #[test]
        fn following_next_reads_every_byte_once(
            text in "([a-zé\u{1F600}]{0,40}\n?){0,30}",
            max in 4usize..64,
        ) {
            let spans = walk(&text, max);
            let mut at = 0;
            for (start, end) in spans {
                prop_assert_eq!(start, at);
                prop_assert!(end - start <= max);
                at = end;
            }
            prop_assert_eq!(at, text.len());
            prop_assert_eq!(line_count(&text), crate::records::inbox::line_count(&text));
        }
    }
}
