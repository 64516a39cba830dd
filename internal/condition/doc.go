// Package condition compiles and evaluates the `when` expressions of policy
// rules: CEL (cel.dev/cel-go) over the variables input, actor, tenant,
// thread_id and action.
//
// An expression is compiled once per action it may govern, against that
// action's input schema: where the schema gives types, input is typed
// (integer is int, number is double, and numbers compare across the two;
// an object's named properties have their types, and when the object
// allows no others, additionalProperties: false, a field it does not name
// is a compile error); elsewhere it is dyn. Compiling without a schema checks
// everything but the fields of input.
//
// Evaluation fails closed. An error (a missing field, a division by zero),
// a result that is not a boolean, or a cost over CostLimit is an error, and
// the caller denies. A Program is safe for concurrent use.
package condition
