//! One schema for every JSON result: each carries `schema` (a name and a
//! version) and the parameters it ran with, so results written by different
//! versions of Hollywood can be told apart and compared.
//!
//! ```
//! use hollywood_experiments::schema::{Schema, Stamped};
//! #[derive(serde::Serialize)]
//! struct Report { on_time: u64 }
//! let s = Stamped::new(Schema::new("hollywood.example", 1), serde_json::json!({"seed": 1}), &Report { on_time: 9 });
//! assert_eq!(
//!     serde_json::to_string(&s).unwrap(),
//!     r#"{"schema":{"name":"hollywood.example","version":1},"params":{"seed":1},"on_time":9}"#
//! );
//! ```
//!
//! A result that is a list (several transports, several runs) is stamped as
//! `{"schema": …, "params": …, "results": [ … ]}`.

use serde::{Deserialize, Serialize, Serializer};

/// The name and version of a JSON result's layout. The version changes when
/// a field is removed or changes meaning (adding a field does not).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// Dotted name, `hollywood.<command>` (e.g. `hollywood.sim.messages`).
    pub name: String,
    /// Layout version.
    pub version: u32,
}

impl Schema {
    /// A schema name and version.
    pub fn new(name: impl Into<String>, version: u32) -> Schema {
        Schema {
            name: name.into(),
            version,
        }
    }
}

/// A result with its schema and parameters in front: an object result's
/// fields follow `schema` and `params`; any other result goes under
/// `results`.
#[derive(Debug)]
pub struct Stamped<'a, T: ?Sized> {
    /// The layout.
    pub schema: Schema,
    /// The parameters the result was produced with.
    pub params: serde_json::Value,
    /// The result.
    pub body: &'a T,
}

impl<'a, T: Serialize + ?Sized> Stamped<'a, T> {
    /// Stamp `body`.
    pub fn new(schema: Schema, params: serde_json::Value, body: &'a T) -> Self {
        Stamped {
            schema,
            params,
            body,
        }
    }
}

impl<T: Serialize + ?Sized> Serialize for Stamped<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Object<'b, B: ?Sized> {
            schema: &'b Schema,
            params: &'b serde_json::Value,
            #[serde(flatten)]
            body: &'b B,
        }
        #[derive(Serialize)]
        struct Wrapped<'b, B: ?Sized> {
            schema: &'b Schema,
            params: &'b serde_json::Value,
            results: &'b B,
        }
        // Only an object can be flattened; find out what the body is.
        let is_object = serde_json::to_value(self.body)
            .map(|v| v.is_object())
            .unwrap_or(false);
        if is_object {
            Object {
                schema: &self.schema,
                params: &self.params,
                body: self.body,
            }
            .serialize(s)
        } else {
            Wrapped {
                schema: &self.schema,
                params: &self.params,
                results: self.body,
            }
            .serialize(s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_flattened_and_lists_wrapped() {
        let params = json!({"rate": "8mbit"});
        let obj = json!({"a": 1, "b": [2]});
        let v =
            serde_json::to_value(Stamped::new(Schema::new("x", 2), params.clone(), &obj)).unwrap();
        assert_eq!(
            v,
            json!({"schema": {"name": "x", "version": 2}, "params": params, "a": 1, "b": [2]})
        );
        let list = vec![1, 2];
        let v = serde_json::to_value(Stamped::new(Schema::new("x", 1), json!({}), &list)).unwrap();
        assert_eq!(v["results"], json!([1, 2]));
        assert_eq!(v["schema"]["version"], 1);
    }
}
