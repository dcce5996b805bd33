package mounts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/objstore"
)

// The secret values the tests plant: none may appear in an error.
var planted = []string{"AKIAPLANTEDKEYID0001", "plantedSecretAccessKey/abc+xyz", "plantedSessionToken-7777", "plantedAccountKey==", "31415926535897932384"}

// noSecret fails t when err's text holds a planted secret.
func noSecret(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range append(planted, []string{"AKIAPLANTED", "plantedSecret", "plantedSession", "plantedAccount", "3141592653"}...) {
		for _, text := range []string{err.Error(), fmt.Sprintf("%v %+v %#v", err, err, err)} {
			if strings.Contains(text, s) {
				t.Errorf("%s: error holds a secret (%q): %s", what, s, text)
			}
		}
	}
}

func writeSecrets(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secrets.json")
	must(t, os.WriteFile(p, []byte(body), mode))
	must(t, os.Chmod(p, mode))
	return p
}

const goodSecrets = `{
	"prod-s3": {"accessKeyId": "AKIAPLANTEDKEYID0001", "secretAccessKey": "plantedSecretAccessKey/abc+xyz", "sessionToken": "plantedSessionToken-7777", "region": "eu-west-1"},
	"azure": {"accountName": "devstoreaccount1", "accountKey": "plantedAccountKey==", "endpoint": "http://127.0.0.1:10000/devstoreaccount1"}
}`

func TestLoadSecrets(t *testing.T) {
	s, err := LoadSecrets(writeSecrets(t, goodSecrets, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	noenv := func(string) string { return "" }
	got, err := s.Lookup("prod-s3", noenv)
	want := objstore.Credentials{AccessKeyID: planted[0], SecretAccessKey: planted[1], SessionToken: planted[2], Region: "eu-west-1"}
	if err != nil || got != want {
		t.Errorf("Lookup(prod-s3): %v, %v", got, err)
	}
	got, err = s.Lookup("azure", noenv)
	want = objstore.Credentials{AccountName: "devstoreaccount1", AccountKey: planted[3], Endpoint: "http://127.0.0.1:10000/devstoreaccount1"}
	if err != nil || got != want {
		t.Errorf("Lookup(azure): %v, %v", got, err)
	}
	if diff := cmp.Diff([]string{"azure", "prod-s3"}, s.IDs()); diff != "" {
		t.Errorf("ids mismatch (-want +got):\n%s", diff)
	}
	for _, text := range []string{s.String(), fmt.Sprintf("%v %+v %#v", s, s, s)} {
		for _, p := range planted {
			if strings.Contains(text, p) {
				t.Errorf("the secrets print a secret: %s", text)
			}
		}
	}

	// The file wins over the environment; the environment has the rest.
	env := map[string]string{
		"TOOLHOST_SECRET_PROD_S3":  `{"accessKeyId": "env-id"}`,
		"TOOLHOST_SECRET_GCS_CI_1": `{"sessionToken": "plantedSessionToken-7777"}`,
	}
	getenv := func(k string) string { return env[k] }
	if got, err := s.Lookup("prod-s3", getenv); err != nil || got.AccessKeyID != planted[0] {
		t.Errorf("Lookup(prod-s3) with the environment set: %v, %v; want the file's", got, err)
	}
	if got, err := s.Lookup("gcs.ci-1", getenv); err != nil || got != (objstore.Credentials{SessionToken: planted[2]}) {
		t.Errorf("Lookup(gcs.ci-1) from the environment: %v, %v", got, err)
	}
	var none *Secrets
	if got, err := none.Lookup("gcs.ci-1", getenv); err != nil || got.SessionToken != planted[2] {
		t.Errorf("Lookup without a file: %v, %v", got, err)
	}
}

func TestEnvName(t *testing.T) {
	for id, want := range map[string]string{"prod": "TOOLHOST_SECRET_PROD", "gcs.ci-1": "TOOLHOST_SECRET_GCS_CI_1", "Mixed_9é": "TOOLHOST_SECRET_MIXED_9_"} {
		if got := EnvName(id); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestSecretsRefused(t *testing.T) {
	good := writeSecrets(t, goodSecrets, 0o600)
	link := filepath.Join(t.TempDir(), "link.json")
	must(t, os.Symlink(good, link))
	cases := map[string]string{
		"mode 0644":  writeSecrets(t, goodSecrets, 0o644),
		"mode 0640":  writeSecrets(t, goodSecrets, 0o640),
		"mode 0602":  writeSecrets(t, goodSecrets, 0o602),
		"symlink":    link,
		"directory":  t.TempDir(),
		"missing":    filepath.Join(t.TempDir(), "nope.json"),
		"not JSON":   writeSecrets(t, `{"prod": {"accessKeyId": "AKIAPLANTEDKEYID0001", "secretAccessKey": plantedSecretAccessKey/abc+xyz}}`, 0o600),
		"cut short":  writeSecrets(t, `{"prod": {"accessKeyId": "AKIAPLANTEDKEYID0001"`, 0o600),
		"a number":   writeSecrets(t, `{"prod": {"accessKeyId": "AKIAPLANTEDKEYID0001", "secretAccessKey": 31415926535897932384}}`, 0o600),
		"an array":   writeSecrets(t, `["AKIAPLANTEDKEYID0001"]`, 0o600),
		"a string":   writeSecrets(t, `{"prod": "plantedSecretAccessKey/abc+xyz"}`, 0o600),
		"unknown":    writeSecrets(t, `{"prod": {"secretKey": "plantedSecretAccessKey/abc+xyz"}}`, 0o600),
		"trailing":   writeSecrets(t, `{"prod": {}} plantedSecretAccessKey/abc+xyz`, 0o600),
		"empty id":   writeSecrets(t, `{"": {"accessKeyId": "AKIAPLANTEDKEYID0001"}}`, 0o600),
		"null":       writeSecrets(t, `null`, 0o600),
		"bad escape": writeSecrets(t, `{"prod": {"accessKeyId": "AKIAPLANTED\qKEYID0001"}}`, 0o600),
	}
	if os.Getuid() == 0 {
		p := writeSecrets(t, goodSecrets, 0o600)
		must(t, os.Chown(p, 65534, 65534))
		cases["owned by another user"] = p
	}
	for name, p := range cases {
		_, err := LoadSecrets(p)
		if !errors.Is(err, ErrSecret) {
			t.Errorf("%s: LoadSecrets: %v, want ErrSecret", name, err)
		}
		noSecret(t, name, err)
		if err != nil && !strings.Contains(err.Error(), "secrets file") {
			t.Errorf("%s: %v does not say it is the secrets file", name, err)
		}
	}
}

func TestLookupRefused(t *testing.T) {
	s, err := LoadSecrets(writeSecrets(t, goodSecrets, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"TOOLHOST_SECRET_BAD_JSON": `{"accessKeyId": AKIAPLANTEDKEYID0001}`,
		"TOOLHOST_SECRET_NUMBER":   `{"secretAccessKey": 31415926535897932384}`,
		"TOOLHOST_SECRET_UNKNOWN":  `{"plantedSecretAccessKey/abc+xyz": "x"}`[:0] + `{"secret": "plantedSecretAccessKey/abc+xyz"}`,
		"TOOLHOST_SECRET_PLAIN":    `plantedSessionToken-7777`,
	}
	getenv := func(k string) string { return env[k] }
	for _, id := range []string{"bad-json", "number", "unknown", "plain", "nobody", ""} {
		_, err := s.Lookup(id, getenv)
		if !errors.Is(err, ErrSecret) {
			t.Errorf("Lookup(%q): %v, want ErrSecret", id, err)
		}
		noSecret(t, "Lookup("+id+")", err)
	}
	_, err = s.Lookup("nobody", getenv)
	if err == nil || !strings.Contains(err.Error(), `"nobody"`) || !strings.Contains(err.Error(), "TOOLHOST_SECRET_NOBODY") {
		t.Errorf("an unknown id: %v, want an error naming it and its variable", err)
	}
}

// TestNoSecretInMountErrors checks the errors of a mount whose store
// fails: they carry the store's words, never the credentials it was
// opened with.
func TestNoSecretInMountErrors(t *testing.T) {
	s, err := LoadSecrets(writeSecrets(t, goodSecrets, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := s.Lookup("prod-s3", nil)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseFlag("name=d,path=/d,uri=s3://bkt/p,secret=prod-s3,rw")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(spec, creds, func(kind, bucket string, c objstore.Credentials) (objstore.Store, error) {
		return nil, fmt.Errorf("cannot open %s with %v (%#v)", bucket, c, c)
	})
	if err == nil {
		t.Fatal("Open with a failing opener succeeded")
	}
	noSecret(t, "Open", err)
	st := newMemStore()
	st.setHooks(func(s *memStore) {
		s.fail = func(op, key string) error {
			return &objstore.Error{Op: op, Key: key, Status: 403, Code: "SignatureDoesNotMatch", Message: "The request signature we calculated does not match", Err: objstore.ErrAuth}
		}
	})
	m, err := New(spec, st, t.TempDir(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Prepare(ctx)
	noSecret(t, "Prepare", err)
	_, err = m.WriteBack(ctx)
	noSecret(t, "WriteBack", err)
	noSecret(t, "State", errors.New(fmt.Sprintf("%+v", m.State())))
}
