//! How much of a page the reader reads, and what it says it left out.

/// How much of a page is read.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// The largest JSON-LD block read, in bytes.
    pub block_bytes: usize,
    /// JSON-LD blocks read per page.
    pub blocks: usize,
    /// Items read per syntax.
    pub items: usize,
    /// Values per property (array elements), and reviews, offers and
    /// images per product.
    pub values: usize,
    /// Items nested in items.
    pub depth: usize,
    /// Elements walked for the page's items' properties.
    pub elements: usize,
    /// Text read out of the page's elements for property values, in bytes
    /// (a value nested in another is read again).
    pub page_text_bytes: usize,
    /// The longest text kept, in bytes.
    pub text_bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            block_bytes: 2 << 20,
            blocks: 64,
            items: 5_000,
            values: 500,
            depth: 32,
            elements: 200_000,
            page_text_bytes: 32 << 20,
            text_bytes: 64 << 10,
        }
    }
}

/// What a bound or a broken block left out, in words.
pub type Notes = Vec<String>;
