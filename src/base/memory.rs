//! Gives back the pages of tabd's own program that start-up touched.
//!
//! Start-up runs code the idle daemon never runs again: argument parsing, config and role
//! parsing for every role, the first scan. The kernel maps each page of the program a thread
//! touches, and 64 KiB around it ("fault-around"), and keeps them mapped: with 50 roles that was
//! 8 of the 13 MiB tabd's resident memory showed while idle. Once started, tabd tells the kernel
//! it no longer needs those mappings (`madvise(MADV_DONTNEED)` on its read-only segments). The
//! pages stay in the page cache; what the daemon needs again comes back with a minor fault, no
//! disk read. And unmapped, they are ordinary cache the kernel can reclaim first, instead of
//! mapped program text it protects.
//!
//! Only segments nothing ever writes are given back: a writable segment, and the relocated data
//! that is made read-only after start (`PT_GNU_RELRO`), hold private copies that dropping would
//! lose, so any page touching them is left alone.

use std::ffi::c_void;

/// A range of addresses, `[start, end)`.
type Span = (usize, usize);

/// What [`release_program_pages`] found and gave back, in bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub read_only: usize,
    pub advised: usize,
}

/// Drops this process's mappings of its program's read-only segments (code and constants).
/// Returns what it advised; errors are ignored (the pages simply stay mapped).
#[allow(
    unsafe_code,
    reason = "madvise on spans of read-only program segments only: see the SAFETY note"
)]
pub fn release_program_pages() -> Released {
    let Some((read_only, writable)) = program_segments() else {
        return Released::default();
    };
    let page = page_size();
    let mut out = Released::default();
    for span in pages_to_release(&read_only, &writable, page) {
        out.read_only += span.1 - span.0;
        // SAFETY: the span lies inside a read-only, never-written segment of the program
        // (page-rounded inward and clear of every writable or relocated page), so no private
        // copy is lost; later accesses fault the same bytes back in from the page cache.
        let rc = unsafe { libc::madvise(span.0 as *mut c_void, span.1 - span.0, libc::MADV_DONTNEED) };
        if rc == 0 {
            out.advised += span.1 - span.0;
        }
    }
    out
}

fn page_size() -> usize {
    rustix::param::page_size()
}

/// The read-only segments, minus every page that touches a writable or relocated one.
fn pages_to_release(read_only: &[Span], writable: &[Span], page: usize) -> Vec<Span> {
    let down = |a: usize| a / page * page;
    let up = |a: usize| a.div_ceil(page) * page;
    let guarded: Vec<Span> = writable.iter().map(|&(s, e)| (down(s), up(e))).collect();
    let mut out = Vec::new();
    for &(s, e) in read_only {
        let mut spans = vec![(up(s), down(e))];
        for &(gs, ge) in &guarded {
            spans = spans
                .into_iter()
                .flat_map(|(s, e)| [(s, e.min(gs)), (s.max(ge), e)])
                .collect();
        }
        out.extend(spans.into_iter().filter(|(s, e)| s < e));
    }
    out
}

/// The main program's loaded segments: (read-only, writable or relocated).
#[allow(
    unsafe_code,
    reason = "dl_iterate_phdr's callback reads only the headers the loader hands it and writes only `found`"
)]
fn program_segments() -> Option<(Vec<Span>, Vec<Span>)> {
    #[derive(Default)]
    struct Found {
        read_only: Vec<Span>,
        writable: Vec<Span>,
        seen: bool,
    }
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> libc::c_int {
        // SAFETY: called by dl_iterate_phdr with a valid info and the `Found` passed below.
        let (info, found) = unsafe { (&*info, &mut *(data as *mut Found)) };
        if info.dlpi_phdr.is_null() {
            return 1;
        }
        // SAFETY: the loader's program headers, `dlpi_phnum` of them.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let base = info.dlpi_addr as usize;
        for h in headers {
            let span = (base + h.p_vaddr as usize, base + (h.p_vaddr + h.p_memsz) as usize);
            let is_load = h.p_type == libc::PT_LOAD;
            if is_load && h.p_flags & libc::PF_W == 0 {
                found.read_only.push(span);
            } else if (is_load && h.p_flags & libc::PF_W != 0) || h.p_type == libc::PT_GNU_RELRO {
                found.writable.push(span);
            }
        }
        found.seen = true;
        // The main program comes first; the shared libraries are not ours to trim.
        1
    }
    let mut found = Found::default();
    // SAFETY: `each` only reads the headers it is given and writes into `found`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut found as *mut Found as *mut c_void) };
    found.seen.then_some((found.read_only, found.writable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_touching_written_data_are_kept() {
        let page = 0x1000;
        // Code from 0x1e80 to 0x5e80; relocated data from 0x5e80; constants before the code.
        let read_only = [(0x0, 0x1e6c), (0x1e80, 0x5e80)];
        let writable = [(0x5e80, 0x7000)];
        assert_eq!(
            pages_to_release(&read_only, &writable, page),
            [(0x0, 0x1000), (0x2000, 0x5000)],
            "rounded inward, and the page shared with the relocated data left alone"
        );
        // A writable hole in the middle splits a segment.
        assert_eq!(
            pages_to_release(&[(0x0, 0x8000)], &[(0x3100, 0x3200)], page),
            [(0x0, 0x3000), (0x4000, 0x8000)]
        );
        assert!(
            pages_to_release(&[(0x10, 0x20)], &[], page).is_empty(),
            "less than a page"
        );
    }

    #[test]
    fn the_program_still_runs_after_giving_its_pages_back() {
        let (read_only, writable) = program_segments().expect("the test binary's own segments");
        assert!(!read_only.is_empty() && !writable.is_empty());
        let before = format!("{:?}", std::hint::black_box(vec![1, 2, 3]));
        let r = release_program_pages();
        assert!(r.advised > 0 && r.advised == r.read_only, "{r:?}");
        // Code, constants and relocated data (vtables, formatting tables) all still work.
        let after = format!("{:?}", std::hint::black_box(vec![1, 2, 3]));
        assert_eq!(before, after);
        let boxed: Box<dyn std::fmt::Display> = Box::new(42);
        assert_eq!(boxed.to_string(), "42");
    }
}
