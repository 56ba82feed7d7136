package structuretest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"testing"
)

// The scopes of the options are the compiler's to check: an inspector takes
// the key prefix and nothing a client alone acts on, a client takes the
// prefix too, and no package outside this module implements an option.
// Each program is type-checked against the packages' export data.
func TestOptionScopesAreTyped(t *testing.T) {
	fset := token.NewFileSet()
	imp := exportImporter(t, fset, module+"/rmq", module+"/consumer", module+"/producer")
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"inspector prefix", `_ = rmq.NewInspector(nil, rmq.WithPrefix("p"))`, true},
		{"shared prefix", `p := rmq.WithPrefix("p"); _, _ = rmq.New(nil, p); _ = rmq.NewInspector(nil, p)`, true},
		{"inspector options slice", `opts := []rmq.InspectorOption{rmq.WithPrefix("p")}; _ = rmq.NewInspector(nil, opts...)`, true},
		{"client options slice", `_, _ = rmq.New(nil, []rmq.Option{rmq.WithPrefix("p"), rmq.WithLogger(nil)}...)`, true},
		{"inspector logger", `_ = rmq.NewInspector(nil, rmq.WithLogger(nil))`, false},
		{"inspector middleware", `_ = rmq.NewInspector(nil, rmq.WithMiddleware())`, false},
		{"inspector client slice", `var opts []rmq.Option; _ = rmq.NewInspector(nil, opts...)`, false},
		{"own client option", `type mine struct{}; var _ rmq.Option = mine{}`, false},
		{"own consumer option", `type mine struct{}; var _ consumer.Option = mine{}`, false},
		{"own producer option", `type mine struct{}; var _ producer.Option = mine{}`, false},
		{"consumer options", `_ = []consumer.Option{consumer.WithConcurrency(1), consumer.WithRateLimit(1, 1)}`, true},
		{"producer options", `_, _ = producer.New(nil, producer.WithPrefix("p"), producer.WithMaxBodySize(1))`, true},
	} {
		src := `package p

import (
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
)

var (
	_ consumer.Option
	_ producer.Option
	_ rmq.Option
)

func f() {
	` + c.body + `
}
`
		f, err := parser.ParseFile(fset, c.name+".go", src, 0)
		if err != nil {
			t.Fatalf("%s: parse: %v", c.name, err)
		}
		_, err = (&types.Config{Importer: imp}).Check("p", fset, []*ast.File{f}, nil)
		if (err == nil) != c.ok {
			t.Errorf("%s: type-checks %v, want %v (%v)", c.name, err == nil, c.ok, err)
		}
	}
}
