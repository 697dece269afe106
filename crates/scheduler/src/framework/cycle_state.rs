//! Data that plugins keep for one pod's scheduling cycle (upstream `framework.CycleState`).
//!
//! A plugin writes its PreFilter or PreScore results under its own key and reads them
//! back in Filter or Score. Preemption clones the whole state to simulate removing
//! victims ([`CycleState::clone`] clones every entry).

use std::any::Any;
use std::collections::HashSet;

/// A value kept in a [`CycleState`]: any `Clone + Send + Sync` type.
pub trait StateData: Any + Send + Sync {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn StateData>;
    /// As `Any`, to downcast.
    fn as_any(&self) -> &dyn Any;
    /// As `Any`, to downcast mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Per-cycle plugin data by key, plus which plugins skip Filter and Score for this pod.
///
/// A handful of entries, read once per node and plugin: a vector searched by key (the
/// same `&'static str` constant, so mostly a pointer comparison) beats hashing.
#[derive(Default)]
pub struct CycleState {
    data: Vec<(&'static str, Box<dyn StateData>)>,
    /// Plugins whose PreFilter returned Skip: their Filter is not run.
    pub skip_filter_plugins: HashSet<&'static str>,
    /// Plugins whose PreScore returned Skip: their Score is not run.
    pub skip_score_plugins: HashSet<&'static str>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        Self {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
            skip_filter_plugins: self.skip_filter_plugins.clone(),
            skip_score_plugins: self.skip_score_plugins.clone(),
        }
    }
}

impl CycleState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.data.iter().position(|(k, _)| {
            std::ptr::eq(k.as_ptr(), key.as_ptr()) && k.len() == key.len() || *k == key
        })
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn write<T: StateData>(&mut self, key: &'static str, value: T) {
        match self.position(key) {
            Some(i) => self.data[i].1 = Box::new(value),
            None => self.data.push((key, Box::new(value))),
        }
    }

    /// The value under `key` if it is a `T`.
    pub fn read<T: 'static>(&self, key: &'static str) -> Option<&T> {
        let i = self.position(key)?;
        (*self.data[i].1).as_any().downcast_ref()
    }

    /// The value under `key`, mutably, if it is a `T`.
    pub fn read_mut<T: 'static>(&mut self, key: &'static str) -> Option<&mut T> {
        let i = self.position(key)?;
        (*self.data[i].1).as_any_mut().downcast_mut()
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: &'static str) {
        if let Some(i) = self.position(key) {
            self.data.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values_and_deep_clone() {
        let mut s = CycleState::new();
        s.write("k", vec![1_i64]);
        let mut copy = s.clone();
        copy.read_mut::<Vec<i64>>("k").unwrap().push(2);
        assert_eq!(s.read::<Vec<i64>>("k").unwrap(), &[1]);
        assert_eq!(copy.read::<Vec<i64>>("k").unwrap(), &[1, 2]);
        assert!(s.read::<String>("k").is_none());
    }
}
