package readmetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlocks(t *testing.T) {
	readme := "# Title\n\n" +
		"<!-- readme-test: a (run by x) -->\n\n```sh\necho 1\n#> 1\n```\n\n" +
		"```go\n<!-- readme-test: a -->\n```\n" + // a marker inside an unmarked block is text
		"<!-- readme-test: b -->\n```text\nb\n```\n" +
		"<!-- readme-test: a -->\n```sh\necho 2\n```\n"
	got, err := Blocks([]byte(readme), "a")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, Block{Name: "a", Lang: "sh", Text: "echo 1\n#> 1\n", Line: 5}, got[0])
	assert.Equal(t, Block{Name: "a", Lang: "sh", Text: "echo 2\n", Line: 18}, got[1])
	got, err = Blocks([]byte(readme), "none")
	require.NoError(t, err)
	assert.Empty(t, got)

	for name, bad := range map[string]string{
		"prose after a marker":  "<!-- readme-test: a -->\ntext\n```sh\n```\n",
		"two markers":           "<!-- readme-test: a -->\n<!-- readme-test: b -->\n```sh\n```\n",
		"unclosed fence":        "<!-- readme-test: a -->\n```sh\necho\n",
		"marker at the end":     "text\n<!-- readme-test: a -->\n",
		"marker without a name": "<!-- readme-test: -->\n```sh\n```\n",
		"marker on two lines":   "<!-- readme-test: a\n-->\n```sh\n```\n",
	} {
		_, err := Blocks([]byte(bad), "a")
		assert.Error(t, err, name)
	}
}

func TestExpectedAndMatch(t *testing.T) {
	script := "curl x\n#> {\"id\":\"…\",\"n\":2} 200\necho\n#>\n#> done  \n# a comment\n"
	want := Expected(script)
	assert.Equal(t, []string{`{"id":"…","n":2} 200`, "", "done  "}, want)

	require.NoError(t, Match(want, Lines("{\"id\":\"01ABC\",\"n\":2} 200\n\ndone\n")))
	require.NoError(t, Match(want, Lines("{\"id\":\"\",\"n\":2} 200\n\ndone")), "… matches nothing too")
	for name, got := range map[string]string{
		"other value":   "{\"id\":\"01ABC\",\"n\":3} 200\n\ndone\n",
		"other status":  "{\"id\":\"01ABC\",\"n\":2} 201\n\ndone\n",
		"a line short":  "{\"id\":\"01ABC\",\"n\":2} 200\n\n",
		"a line more":   "{\"id\":\"01ABC\",\"n\":2} 200\n\ndone\nmore\n",
		"regexp quoted": "{\"id\":\"01ABC\",\"n\":2} 200\n\ndon.\n",
	} {
		assert.Error(t, Match(want, Lines(got)), name)
	}
	assert.Error(t, Match([]string{"a.c"}, []string{"abc"}), "a pattern's dot is a dot")
}
