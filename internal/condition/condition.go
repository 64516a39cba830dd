package condition

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Limits of an expression. They are fixed, not options: a configuration
// file must not be able to raise the budget that keeps a hostile expression
// from holding a call.
const (
	// CostLimit is the most an evaluation may cost, in CEL's cost units
	// (about one per variable read, comparison or list element visited).
	// A rule over a few fields costs under 10; 10,000 lets a rule scan a
	// list of some thousand items and stops a quadratic one in well under
	// a millisecond.
	CostLimit = 10_000
	// MaxLength is the longest expression accepted, in code points.
	MaxLength = 4096
	// InputBound and NameBound are the sizes (bytes, elements or entries)
	// up to which a call's variables are assumed bounded when an
	// expression's cost is estimated at compile time: no string, list or
	// map of the input larger than InputBound, no other variable (an id,
	// the list of roles, a role) larger than NameBound. See Vars.Bounded.
	InputBound = 64 << 10
	NameBound  = 1 << 10
	// maxDepth bounds how deep into a schema input is typed; below it, dyn.
	maxDepth = 32
)

// The names of the struct types of actor and action.
const (
	actorType  = "countersign.Actor"
	actionType = "countersign.Action"
	inputType  = "countersign.Input"
)

// Vars are the variables of one evaluation. A *Vars is the activation CEL
// reads them from, so an evaluation builds no map of them. A Vars is for
// one call (the programs of its conditions may share it), not for
// concurrent use.
type Vars struct {
	// InputJSON is the validated input. An object's fields are decoded as
	// an expression reads them: most conditions read one or two fields of
	// a small object, and decoding all of it would cost more than
	// evaluating them.
	InputJSON []byte
	ActorID   string
	Roles     []string
	Tenant    string
	ThreadID  string
	// Action is the action's name, version and kind.
	ActionName, ActionVersion, ActionKind string

	roles     ref.Val    // Roles as a CEL list, made on first use
	root      rootObject // InputJSON read as an object (raw nil until first use)
	decoded   any        // InputJSON decoded whole, on first use
	asRaw     bool       // input is read as a rawObject (its type is a struct)
	bounds    int8       // 0: not checked yet; 1: bounded; -1: not
	decodeOK  bool
	decodeErr error
}

// bounded reports whether v is within the bounds cost estimates assume
// (InputBound, NameBound): a decoded input holds no string, list or map
// larger than its JSON text.
func (v *Vars) bounded() bool {
	if v.bounds == 0 {
		v.bounds = -1
		if v.withinBounds() {
			v.bounds = 1
		}
	}
	return v.bounds == 1
}

func (v *Vars) withinBounds() bool {
	if len(v.InputJSON) > InputBound || len(v.Roles) > NameBound {
		return false
	}
	for _, s := range [...]string{v.ActorID, v.Tenant, v.ThreadID, v.ActionName, v.ActionVersion, v.ActionKind} {
		if len(s) > NameBound {
			return false
		}
	}
	for _, r := range v.Roles {
		if len(r) > NameBound {
			return false
		}
	}
	return true
}

// ResolveName implements interpreter.Activation. actor and action resolve
// to v itself: their fields' getters know where to look.
func (v *Vars) ResolveName(name string) (any, bool) {
	switch name {
	case "input":
		if v.asRaw {
			if v.root.raw == nil {
				v.root.raw = rawObject(v.InputJSON)
				v.root.fields = v.root.buf[:0]
			}
			return &v.root, true
		}
		if !v.decodeOK {
			v.decoded, v.decodeErr = DecodeJSON(v.InputJSON)
			v.decodeOK = true
		}
		if v.decodeErr != nil {
			return types.WrapErr(v.decodeErr), true
		}
		return v.decoded, true
	case "actor", "action":
		return v, true
	case "tenant":
		return v.Tenant, true
	case "thread_id":
		return v.ThreadID, true
	}
	return nil, false
}

// Parent implements interpreter.Activation: there is none.
func (v *Vars) Parent() interpreter.Activation { return nil }

// Program is one compiled expression.
type Program struct {
	// inputStruct is whether input is a struct type (an object schema
	// that names its properties), whose fields are read from the JSON
	// text as the expression reads them.
	inputStruct bool
	// tracked counts the cost of each evaluation and stops it at
	// CostLimit. fast, when set, does not: the expression's estimated
	// worst case over bounded variables is within CostLimit, so for
	// those calls counting would only slow them down.
	tracked, fast cel.Program
	// Cost is the estimated worst case over bounded variables.
	Cost uint64
	// vars are the variables the expression reads (see Variables).
	vars []string
}

// The variables of an expression.
const (
	VarInput    = "input"
	VarActor    = "actor"
	VarTenant   = "tenant"
	VarThreadID = "thread_id"
	VarAction   = "action"
)

// Variables are the variables (VarInput, VarActor, …) the expression reads,
// sorted: every one that it names outside a comprehension that binds the
// name to something else. A variable named but not read on every
// evaluation (behind a && that is false) counts: which variables an
// evaluation may depend on is what this answers, for a caller that
// evaluates ahead of a call the expressions that read only what it knows.
func (p *Program) Variables() []string { return slices.Clone(p.vars) }

// variables returns the free identifiers of e that name variables of the
// environment, sorted.
func variables(e celast.Expr) []string {
	found := map[string]bool{}
	bound := map[string]int{}
	var walk func(e celast.Expr)
	walk = func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if name := e.AsIdent(); bound[name] == 0 {
				found[name] = true
			}
		case celast.SelectKind:
			walk(e.AsSelect().Operand())
		case celast.CallKind:
			c := e.AsCall()
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, a := range c.Args() {
				walk(a)
			}
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el)
			}
		case celast.MapKind:
			for _, en := range e.AsMap().Entries() {
				me := en.AsMapEntry()
				walk(me.Key())
				walk(me.Value())
			}
		case celast.StructKind:
			for _, f := range e.AsStruct().Fields() {
				walk(f.AsStructField().Value())
			}
		case celast.ComprehensionKind:
			// The range and the accumulator's start are read in the
			// enclosing scope; the loop sees the iteration variables and
			// the accumulator, the result the accumulator.
			c := e.AsComprehension()
			walk(c.IterRange())
			walk(c.AccuInit())
			iters := []string{c.IterVar()}
			if c.HasIterVar2() {
				iters = append(iters, c.IterVar2())
			}
			bound[c.AccuVar()]++
			for _, v := range iters {
				bound[v]++
			}
			walk(c.LoopCondition())
			walk(c.LoopStep())
			for _, v := range iters {
				bound[v]--
			}
			walk(c.Result())
			bound[c.AccuVar()]--
		}
	}
	walk(e)
	var out []string
	for _, v := range []string{VarAction, VarActor, VarInput, VarTenant, VarThreadID} {
		if found[v] {
			out = append(out, v)
		}
	}
	return out
}

// Compile parses and type-checks expr. With a schema (a JSON Schema
// document), input is typed from it, and a field the schema cannot have is
// an error; without one (nil), input is dyn. The result must be a boolean,
// or dyn (checked at evaluation).
func Compile(expr string, schema json.RawMessage) (*Program, error) {
	if expr == "" {
		return nil, errors.New("the expression is empty")
	}
	env, in, err := newEnv(schema, MaxLength)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		// One line per problem, by column: the caller names the file and
		// line of the expression.
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message))
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	switch out := ast.OutputType(); {
	case out.IsExactType(types.BoolType), out.IsExactType(types.DynType):
	default:
		return nil, fmt.Errorf("the expression is %s, not a boolean", out)
	}
	prog := &Program{inputStruct: in.Kind() == types.StructKind, vars: variables(ast.NativeRep().Expr())}
	if prog.tracked, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(CostLimit)); err != nil {
		return nil, err
	}
	est, err := env.EstimateCost(ast, boundedSizes{})
	if err != nil {
		return nil, fmt.Errorf("estimate cost: %w", err)
	}
	prog.Cost = est.Max
	if est.Max <= CostLimit {
		if prog.fast, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
			return nil, err
		}
	}
	return prog, nil
}

// newEnv is the environment of expressions over input of schema (nil:
// dyn), up to limit code points long, and the type of input.
func newEnv(schema json.RawMessage, limit int) (*cel.Env, *types.Type, error) {
	p := newProvider()
	in := types.DynType
	if len(schema) > 0 {
		var doc any
		if err := json.Unmarshal(schema, &doc); err != nil {
			return nil, nil, fmt.Errorf("input schema: %w", err)
		}
		in = p.typeOf(doc, inputType, 0)
	}
	env, err := cel.NewEnv(
		cel.CustomTypeProvider(p),
		cel.Variable(VarInput, in),
		cel.Variable(VarActor, types.NewObjectType(actorType)),
		cel.Variable(VarTenant, types.StringType),
		cel.Variable(VarThreadID, types.StringType),
		cel.Variable(VarAction, types.NewObjectType(actionType)),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(limit),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("environment: %w", err)
	}
	return env, in, nil
}

// Chain is consecutive conditions, each compiled by Compile, evaluated as
// one program that answers the position of the first that holds: one
// evaluation's set-up instead of one each. It is only a faster way to the
// answer evaluating them in turn gives, and gives none (ok false) whenever
// that answer might differ: when a condition errors or is not a boolean,
// or the variables are not bounded. The caller then evaluates them in turn.
type Chain struct {
	prg         cel.Program
	inputStruct bool
}

// NewChain compiles exprs, which Compile accepted against schema, into a
// Chain. It returns nil when their estimated worst case together exceeds
// CostLimit: evaluated in turn, each is within it, so counting would be
// needed to stop the chain where they would not stop.
func NewChain(exprs []string, schema json.RawMessage) (*Chain, error) {
	// "(c0) ? 0 : ((c1) ? 1 : -1)"; each on its own lines, so that a //
	// comment in one ends with it.
	var b strings.Builder
	for i, e := range exprs {
		fmt.Fprintf(&b, "(\n%s\n) ? %d : (", e, i)
	}
	b.WriteString("-1")
	b.WriteString(strings.Repeat(")", len(exprs)))
	env, in, err := newEnv(schema, len(exprs)*(MaxLength+32)+8)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(b.String())
	if iss.Err() != nil {
		return nil, fmt.Errorf("chain: %w", iss.Err())
	}
	est, err := env.EstimateCost(ast, boundedSizes{})
	if err != nil {
		return nil, fmt.Errorf("chain: estimate cost: %w", err)
	}
	if est.Max > CostLimit {
		return nil, nil
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("chain: %w", err)
	}
	return &Chain{prg: prg, inputStruct: in.Kind() == types.StructKind}, nil
}

// Eval returns the position of the first condition that holds over v, or
// -1 when none does; ok is false when Chain cannot answer (see Chain).
func (c *Chain) Eval(v *Vars) (first int, ok bool) {
	v.asRaw = c.inputStruct
	if !v.bounded() {
		return 0, false
	}
	out, _, err := c.prg.Eval(v)
	if err != nil {
		return 0, false
	}
	i, isInt := out.(types.Int)
	return int(i), isInt
}

// evalTracked evaluates with the cost counted, whichever program Eval
// would use, and returns the cost counted: for tests, which check that the
// estimate bounds it.
func (p *Program) evalTracked(v *Vars) (bool, uint64, error) {
	v.asRaw = p.inputStruct
	out, det, err := p.tracked.Eval(v)
	var spent uint64
	if det != nil && det.ActualCost() != nil {
		spent = *det.ActualCost()
	}
	if err != nil {
		return false, spent, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, spent, fmt.Errorf("the result is %s, not a boolean", out.Type().TypeName())
	}
	return bool(b), spent, nil
}

// boundedSizes estimates the values reachable from input at most
// InputBound in size, and those of the other variables at most NameBound.
type boundedSizes struct{}

func (boundedSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

func (boundedSizes) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	switch path := n.Path(); {
	case len(path) == 0:
		return nil
	case path[0] == "input":
		return &cost.SizeEstimate{Min: 0, Max: InputBound}
	default:
		return &cost.SizeEstimate{Min: 0, Max: NameBound}
	}
}

// Eval evaluates the expression over v. Anything but true or false is an
// error: the caller fails closed.
func (p *Program) Eval(v *Vars) (bool, error) {
	prg := p.tracked
	v.asRaw = p.inputStruct
	if p.fast != nil && v.bounded() {
		prg = p.fast
	}
	out, _, err := prg.Eval(v)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the result is %s, not a boolean", out.Type().TypeName())
	}
	return bool(b), nil
}

// provider gives CEL the struct types of one environment: actor, action,
// and the objects of the input schema.
type provider struct {
	*types.Registry
	structs map[string]*object
}

type object struct {
	fields map[string]*types.FieldType
	names  []string
	// open objects (additionalProperties allowed) accept any other field,
	// as dyn.
	open bool
}

func newProvider() *provider {
	p := &provider{Registry: types.NewEmptyRegistry(), structs: map[string]*object{}}
	p.structs[actorType] = &object{fields: map[string]*types.FieldType{
		"id": varsField(types.StringType, func(v *Vars) any { return v.ActorID }),
		"roles": varsField(types.NewListType(types.StringType), func(v *Vars) any {
			// A list of strings, not []string: the adapter would go
			// through reflection for every element on every read.
			if v.roles == nil {
				v.roles = types.NewStringList(types.DefaultTypeAdapter, v.Roles)
			}
			return v.roles
		}),
	}, names: []string{"id", "roles"}}
	p.structs[actionType] = &object{fields: map[string]*types.FieldType{
		"name":    varsField(types.StringType, func(v *Vars) any { return v.ActionName }),
		"version": varsField(types.StringType, func(v *Vars) any { return v.ActionVersion }),
		"kind":    varsField(types.StringType, func(v *Vars) any { return v.ActionKind }),
	}, names: []string{"name", "version", "kind"}}
	return p
}

func varsField(t *types.Type, get func(*Vars) any) *types.FieldType {
	return &types.FieldType{
		Type:  t,
		IsSet: func(target any) bool { _, ok := target.(*Vars); return ok },
		GetFrom: func(target any) (any, error) {
			v, ok := target.(*Vars)
			if !ok {
				return nil, errors.New("not a call's variables")
			}
			return get(v), nil
		},
	}
}

// FindStructType implements types.Provider.
func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.structs[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	if o, ok := p.structs[name]; ok {
		return o.names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *provider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	o, ok := p.structs[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, field)
	}
	if ft, ok := o.fields[field]; ok {
		return ft, true
	}
	if o.open {
		return inputField(field, types.DynType), true
	}
	return nil, false
}

// NewValue implements types.Provider: these types cannot be constructed.
func (p *provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.structs[name]; ok {
		return types.NewErr("%s cannot be constructed", name)
	}
	return p.Registry.NewValue(name, fields)
}

// typeOf is the CEL type of values of the JSON Schema s. name is the struct
// type name for s when it is an object that names its properties.
func (p *provider) typeOf(s any, name string, depth int) *types.Type {
	m, ok := s.(map[string]any)
	if !ok || depth > maxDepth {
		return types.DynType
	}
	kind, _ := m["type"].(string)
	if kind != "object" && composed(m) {
		return types.DynType
	}
	if kind == "" {
		if _, ok := m["properties"]; ok {
			kind = "object"
		}
	}
	switch kind {
	case "string":
		return types.StringType
	case "integer":
		return types.IntType
	case "number":
		return types.DoubleType
	case "boolean":
		return types.BoolType
	case "null":
		return types.NullType
	case "array":
		if items, ok := m["items"].(map[string]any); ok {
			return types.NewListType(p.typeOf(items, name+".items", depth+1))
		}
		return types.NewListType(types.DynType)
	case "object":
		props, _ := m["properties"].(map[string]any)
		extra, hasExtra := m["additionalProperties"]
		if len(props) == 0 {
			if es, ok := extra.(map[string]any); ok {
				return types.NewMapType(types.StringType, p.typeOf(es, name+".values", depth+1))
			}
			return types.NewMapType(types.StringType, types.DynType)
		}
		// The named properties are typed; any other field is one the
		// schema cannot have (an error) only when it allows no others
		// and says so plainly, as config checks placeholders.
		o := &object{fields: map[string]*types.FieldType{}, open: !hasExtra || extra != false || composed(m)}
		i := 0
		for k, ps := range props {
			i++
			o.fields[k] = inputField(k, p.typeOf(ps, name+".f"+strconv.Itoa(i), depth+1))
			o.names = append(o.names, k)
		}
		p.structs[name] = o
		return types.NewObjectType(name)
	}
	return types.DynType
}

// composed reports whether schema s composes others or refers elsewhere,
// or lets patterns name its properties: then which fields it can have is
// not judged.
func composed(s map[string]any) bool {
	for _, k := range []string{"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "patternProperties", "dependentSchemas", "unevaluatedProperties"} {
		if _, has := s[k]; has {
			return true
		}
	}
	return false
}

// inputField reads the property key of an input object, a rawObject or a
// decoded map[string]any, converted to t: JSON numbers decode as float64,
// and an integer field is an int.
func inputField(key string, t *types.Type) *types.FieldType {
	return &types.FieldType{
		Type: t,
		IsSet: func(target any) bool {
			v, ok, err := fieldOf(target, key, t)
			return err == nil && ok && v != nil
		},
		GetFrom: func(target any) (any, error) {
			v, ok, err := fieldOf(target, key, t)
			switch {
			case err != nil:
				return nil, err
			case !ok:
				return nil, fmt.Errorf("no such key: %s", key)
			}
			return v, nil
		},
	}
}

// rootObject is the input object: its fields are read from its JSON text
// once each, however many conditions read them.
type rootObject struct {
	raw    rawObject
	fields []rootField
	buf    [4]rootField // fields' first array: most conditions read few
}

type rootField struct {
	key string
	v   any
	ok  bool
	err error
}

// fieldOf is the field key of the object target, as a value of type t.
func fieldOf(target any, key string, t *types.Type) (any, bool, error) {
	switch o := target.(type) {
	case *rootObject:
		for i := range o.fields {
			if f := &o.fields[i]; f.key == key {
				return f.v, f.ok, f.err
			}
		}
		v, ok, err := fieldOf(o.raw, key, t)
		o.fields = append(o.fields, rootField{key, v, ok, err})
		return v, ok, err
	case rawObject:
		raw, ok, err := o.field(key)
		if err != nil || !ok {
			return nil, ok, err
		}
		if t.Kind() == types.StructKind && len(raw) > 0 && raw[0] == '{' {
			return rawObject(raw), true, nil
		}
		v, err := DecodeJSON(raw)
		if err != nil {
			return nil, false, err
		}
		return conform(v, t), true, nil
	case map[string]any:
		v, ok := o[key]
		if !ok {
			return nil, false, nil
		}
		return conform(v, t), true, nil
	}
	return nil, false, nil
}

// conform converts v, decoded JSON, to the representation of t: integral
// numbers of an int type become int64, in lists and maps too. Everything
// else is left as it is.
func conform(v any, t *types.Type) any {
	switch t.Kind() {
	case types.IntKind:
		if f, ok := v.(float64); ok && f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(f)
		}
	case types.ListKind:
		elem := t.Parameters()[0]
		if !needsConform(elem) {
			return v
		}
		if l, ok := v.([]any); ok {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = conform(e, elem)
			}
			return out
		}
	case types.MapKind:
		val := t.Parameters()[1]
		if !needsConform(val) {
			return v
		}
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, e := range m {
				out[k] = conform(e, val)
			}
			return out
		}
	}
	return v
}

// needsConform reports whether values of t may need conform: ints, and
// lists and maps that hold them. Struct fields convert as they are read.
func needsConform(t *types.Type) bool {
	switch t.Kind() {
	case types.IntKind:
		return true
	case types.ListKind:
		return needsConform(t.Parameters()[0])
	case types.MapKind:
		return needsConform(t.Parameters()[1])
	}
	return false
}
