package tools

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// TestAddProtectRepoRules: a "**/.git/NAME" entry becomes a repository
// rule and the root's own .git/NAME; other entries stay paths in the
// root; a malformed rule, or "**" elsewhere, is InvalidParams naming the
// entry. The wire lists the rules, then the paths they do not imply.
func TestAddProtectRepoRules(t *testing.T) {
	c := &confinement{root: "/r"}
	tests := []struct {
		name      string
		base      level
		asked     []string
		wantPaths []string
		wantRepos []string
		wantWire  []string
		wantErr   string
	}{
		{"the agents' defaults", level{}, []string{"**/.git/hooks", "**/.git/config"},
			[]string{"/r/.git/config", "/r/.git/hooks"}, []string{"config", "hooks"}, []string{"**/.git/config", "**/.git/hooks"}, ""},
		{"a plain path beside a rule", level{}, []string{".git/hooks", "**/.git/info/attributes", "secrets"},
			[]string{"/r/.git/hooks", "/r/.git/info/attributes", "/r/secrets"}, []string{"info/attributes"}, []string{"**/.git/info/attributes", "/r/.git/hooks", "/r/secrets"}, ""},
		{"added to a base, without duplicates", level{protect: []string{"/r/.git/hooks"}, repos: []string{"hooks"}}, []string{"**/.git/hooks", "**/.git/config"},
			[]string{"/r/.git/config", "/r/.git/hooks"}, []string{"config", "hooks"}, []string{"**/.git/config", "**/.git/hooks"}, ""},
		{"a rule with nothing after it", level{}, []string{"**/.git/"}, nil, nil, nil, `sandbox.protect[0]`},
		{"a rule that climbs out", level{}, []string{"**/.git/../x"}, nil, nil, nil, `sandbox.protect[0]`},
		{"a rule with a glob", level{}, []string{"**/.git/hooks/*"}, nil, nil, nil, `sandbox.protect[0]`},
		{"** elsewhere", level{}, []string{"ok", "**/node_modules"}, nil, nil, nil, `sandbox.protect[1]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths, repos, err := c.addProtect(tt.base, tt.asked, "sandbox.protect")
			if tt.wantErr != "" {
				var e *protocol.Error
				if !errors.As(err, &e) || e.Code != protocol.CodeInvalidParams || e.Data == nil || e.Data.Field != tt.wantErr {
					t.Fatalf("err = %v, want InvalidParams naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantPaths, paths); diff != "" {
				t.Errorf("paths mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRepos, repos); diff != "" {
				t.Errorf("repos mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWire, c.protectWire(level{protect: paths, repos: repos})); diff != "" {
				t.Errorf("wire mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRepoPaths: each git directory's NAMEs, but those already there and
// any that is or holds the root.
func TestRepoPaths(t *testing.T) {
	c := &confinement{root: "/w/r"}
	got := c.repoPaths([]string{"/w/r/.git", "/w/r/sub/.git", "/w"}, []string{"config", "r"}, []string{"/w/r/.git/config"})
	want := []string{"/w/r/.git/r", "/w/r/sub/.git/config", "/w/r/sub/.git/r", "/w/config"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("repoPaths mismatch (-want +got):\n%s", diff)
	}
}
