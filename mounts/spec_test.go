package mounts

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/objstore"
)

func TestParseURI(t *testing.T) {
	type parsed struct{ Kind, Bucket, Prefix string }
	for _, tc := range []struct {
		uri  string
		want parsed
	}{
		{"s3://bkt/data", parsed{KindS3, "bkt", "data/"}},
		{"s3://bkt/data/", parsed{KindS3, "bkt", "data/"}},
		{"s3://bkt", parsed{KindS3, "bkt", ""}},
		{"s3://bkt/", parsed{KindS3, "bkt", ""}},
		{"r2://b/a/b c?d#e", parsed{KindR2, "b", "a/b c?d#e/"}},
		{"gs://my_bucket.example/x", parsed{KindGCS, "my_bucket.example", "x/"}},
		{"az://container/deep/er", parsed{KindAzureBlob, "container", "deep/er/"}},
	} {
		k, b, p, err := ParseURI(tc.uri)
		if err != nil {
			t.Errorf("ParseURI(%q): %v", tc.uri, err)
			continue
		}
		if diff := cmp.Diff(tc.want, parsed{k, b, p}); diff != "" {
			t.Errorf("ParseURI(%q) mismatch (-want +got):\n%s", tc.uri, diff)
		}
	}
	for _, uri := range []string{
		"", "bkt/data", "s3:/bkt", "http://bkt/x", "S3://bkt", "s3://", "s3:///data",
		"s3://user@bkt/x", "s3://bkt:9000/x", "s3://bkt/a//b", "s3://bkt/a/../b", "s3://bkt/./a", "s3://bkt//",
		"s3://b\nk", "box://b/x",
	} {
		if _, _, _, err := ParseURI(uri); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseURI(%q): %v, want ErrSpec", uri, err)
		}
	}
}

func TestParseFlag(t *testing.T) {
	got, err := ParseFlag("name=data,path=/mnt/data,uri=s3://bkt/data,secret=prod-s3")
	want := Spec{Name: "data", Path: "/mnt/data", ReadOnly: true, Kind: KindS3, URI: "s3://bkt/data", SecretID: "prod-s3"}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("ParseFlag: %+v, %v; want %+v", got, err, want)
	}
	got, err = ParseFlag("rw,uri=az://ctr,path=/w,name=w")
	want = Spec{Name: "w", Path: "/w", Kind: KindAzureBlob, URI: "az://ctr"}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("ParseFlag rw: %+v, %v; want %+v", got, err, want)
	}
	for _, v := range []string{
		"", "path=/p,uri=s3://b", "name=n,uri=s3://b", "name=n,path=/p",
		"name=,path=/p,uri=s3://b", "name=n,path=p,uri=s3://b", "name=n,path=/p/../q,uri=s3://b",
		"name=n,path=/p/,uri=s3://b", "name=n,path=/p,uri=ftp://b", "name=n,path=/p,uri=s3://b,rw=yes",
		"name=n,path=/p,uri=s3://b,ro", "name=n,name=m,path=/p,uri=s3://b", "name=n,path=/p,uri=s3://b,secret=",
		"name=a/b,path=/p,uri=s3://b", "name=..,path=/p,uri=s3://b",
	} {
		if _, err := ParseFlag(v); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseFlag(%q): %v, want ErrSpec", v, err)
		}
	}
}

func TestCheckSpecs(t *testing.T) {
	s := func(name, path, kind, uri string) Spec { return Spec{Name: name, Path: path, Kind: kind, URI: uri} }
	ok := []Spec{s("a", "/m/a", KindS3, "s3://b/a"), s("b", "/m/ab", KindGCS, "gs://b"), s("c", "/work/c", KindR2, "r2://b/c")}
	if err := CheckSpecs(ok); err != nil {
		t.Errorf("CheckSpecs: %v", err)
	}
	for name, tc := range map[string]struct {
		specs []Spec
		want  error
	}{
		"duplicate name": {[]Spec{s("a", "/x", KindS3, "s3://b"), s("a", "/y", KindS3, "s3://b")}, ErrSpec},
		"same path":      {[]Spec{s("a", "/x", KindS3, "s3://b"), s("b", "/x", KindS3, "s3://b")}, ErrSpec},
		"nested path":    {[]Spec{s("a", "/x/y", KindS3, "s3://b"), s("b", "/x", KindS3, "s3://b")}, ErrSpec},
		"root":           {[]Spec{s("a", "/", KindS3, "s3://b"), s("b", "/x", KindS3, "s3://b")}, ErrSpec},
		"kind mismatch":  {[]Spec{s("a", "/x", KindS3, "gs://b")}, ErrSpec},
		"r2 as s3":       {[]Spec{s("a", "/x", KindR2, "s3://b")}, ErrSpec},
		"boxStorage":     {[]Spec{s("a", "/x", KindBoxStorage, "s3://b")}, ErrUnsupported},
		"providerNative": {[]Spec{s("a", "/x", KindProviderNative, "s3://b")}, ErrUnsupported},
		"unknown kind":   {[]Spec{s("a", "/x", "ftp", "s3://b")}, ErrUnsupported},
		"no name":        {[]Spec{s("", "/x", KindS3, "s3://b")}, ErrSpec},
		"relative path":  {[]Spec{s("a", "x", KindS3, "s3://b")}, ErrSpec},
	} {
		if err := CheckSpecs(tc.specs); !errors.Is(err, tc.want) {
			t.Errorf("%s: CheckSpecs: %v, want %v", name, err, tc.want)
		}
	}
}

func TestOpen(t *testing.T) {
	creds := objstore.Credentials{AccessKeyID: "AKIA-OPEN-ID", SecretAccessKey: "open-secret-value"}
	var gotKind, gotBucket string
	var gotCreds objstore.Credentials
	st := newMemStore()
	opener := func(kind, bucket string, c objstore.Credentials) (objstore.Store, error) {
		gotKind, gotBucket, gotCreds = kind, bucket, c
		return st, nil
	}
	spec, err := ParseFlag("name=d,path=/d,uri=gs://bkt/p,secret=x")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(spec, creds, opener)
	if err != nil || s != objstore.Store(st) || gotKind != KindGCS || gotBucket != "bkt" || gotCreds != creds {
		t.Errorf("Open: %v, %v; opened %q %q %v", s, err, gotKind, gotBucket, gotCreds)
	}
	failing := func(kind, bucket string, c objstore.Credentials) (objstore.Store, error) {
		return nil, errors.New("endpoint http://example.com is not loopback")
	}
	_, err = Open(spec, creds, failing)
	var me *Error
	if !errors.As(err, &me) || me.Name != "d" || me.Kind != KindGCS || !strings.Contains(me.Reason, "not loopback") {
		t.Errorf("Open with a failing opener: %v, want an *Error with its words", err)
	}
	_, err = Open(Spec{Name: "b", Path: "/b", Kind: KindBoxStorage, URI: "s3://b"}, creds, opener)
	if !errors.Is(err, ErrUnsupported) || !errors.As(err, &me) || me.Kind != KindBoxStorage {
		t.Errorf("Open of boxStorage: %v, want an *Error wrapping ErrUnsupported", err)
	}
}
