//! `[recording]`: which browser work is recorded (screencast frames, the
//! action log, a network summary), where recordings are kept, and how much.

use std::path::PathBuf;

use serde::Deserialize;

/// `recording.when`: whose browser work is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordWhen {
    /// Browser work of an identity signed in on the call's strategy, and
    /// every live-view sign-in session.
    SignedIn,
    /// All browser work.
    Always,
    /// None.
    Never,
}

/// `[recording]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecordingConfig {
    pub when: RecordWhen,
    /// Where recordings are kept; relative to the config's folder.
    /// Default: `<pool.data_dir>/recordings`.
    pub dir: Option<PathBuf>,
    /// Screencast frames kept per second, at most.
    pub fps: f64,
    /// The frames' largest side, in pixels.
    pub frame_width: u32,
    /// Frames of one recording, at most (later frames are dropped and counted).
    pub max_recording_mb: u64,
    /// All recordings together, at most: the oldest are removed first.
    pub max_total_mb: u64,
    /// Recordings older than this are removed.
    pub max_age_days: u64,
}

impl Default for RecordingConfig {
    fn default() -> Self {
        RecordingConfig {
            when: RecordWhen::SignedIn,
            dir: None,
            fps: 2.0,
            frame_width: 1024,
            max_recording_mb: 16,
            max_total_mb: 512,
            max_age_days: 14,
        }
    }
}

impl RecordingConfig {
    /// What is wrong with these values, if anything.
    pub fn problem(&self) -> Option<String> {
        if !(self.fps > 0.0 && self.fps <= 30.0) {
            return Some(format!(
                "recording.fps must be above 0 and at most 30 (is {})",
                self.fps
            ));
        }
        if !(160..=3840).contains(&self.frame_width) {
            return Some(format!(
                "recording.frame_width must be 160 to 3840 pixels (is {})",
                self.frame_width
            ));
        }
        if self.max_recording_mb == 0 || self.max_total_mb < self.max_recording_mb {
            return Some(format!(
                "recording.max_total_mb ({}) must be at least recording.max_recording_mb ({}), which must be at least 1",
                self.max_total_mb, self.max_recording_mb
            ));
        }
        None
    }
}
