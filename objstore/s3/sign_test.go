package s3

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The four worked examples of AWS's "Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk" (S3 API
// reference, sig-v4-header-based-auth), reproduced byte for byte.
func TestSignAWSExamples(t *testing.T) {
	const (
		accessKey = "AKIAIOSFODNN7EXAMPLE"
		secretKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	)
	when := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		method    string
		path      string
		query     url.Values
		header    map[string]string
		payload   string
		canonical string
		signed    string
		signature string
	}{
		{
			name: "GET Object", method: "GET", path: "/test.txt",
			header:  map[string]string{"Range": "bytes=0-9"},
			payload: emptySHA256,
			canonical: "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n" +
				"x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n" +
				"x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n" +
				"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			signed:    "host;range;x-amz-content-sha256;x-amz-date",
			signature: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
		{
			name: "PUT Object", method: "PUT", path: "/test$file.text",
			header: map[string]string{
				"Date":                "Fri, 24 May 2013 00:00:00 GMT",
				"X-Amz-Storage-Class": "REDUCED_REDUNDANCY",
			},
			payload: "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			canonical: "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\n" +
				"host:examplebucket.s3.amazonaws.com\n" +
				"x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n" +
				"x-amz-date:20130524T000000Z\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n" +
				"date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n" +
				"44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			signed:    "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			signature: "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		},
		{
			name: "GET Bucket Lifecycle", method: "GET", path: "/",
			query:   url.Values{"lifecycle": {""}},
			payload: emptySHA256,
			canonical: "GET\n/\nlifecycle=\nhost:examplebucket.s3.amazonaws.com\n" +
				"x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n" +
				"x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n" +
				"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			signed:    "host;x-amz-content-sha256;x-amz-date",
			signature: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
		{
			name: "Get Bucket (List Objects)", method: "GET", path: "/",
			query:   url.Values{"max-keys": {"2"}, "prefix": {"J"}},
			payload: emptySHA256,
			canonical: "GET\n/\nmax-keys=2&prefix=J\nhost:examplebucket.s3.amazonaws.com\n" +
				"x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n" +
				"x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n" +
				"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			signed:    "host;x-amz-content-sha256;x-amz-date",
			signature: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL = &url.URL{Scheme: "https", Host: "examplebucket.s3.amazonaws.com",
				Path: tc.path, RawPath: uriEncode(tc.path, false), RawQuery: canonicalQuery(tc.query)}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			s := &signer{accessKey: accessKey, secretKey: secretKey, region: "us-east-1", service: "s3"}
			s.sign(req, tc.payload, when)

			if creq, _ := canonicalRequest(req, tc.payload); creq != tc.canonical {
				t.Errorf("canonical request:\n%s\nwant:\n%s", creq, tc.canonical)
			}
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=" +
				tc.signed + ", Signature=" + tc.signature
			if got := req.Header.Get("Authorization"); got != want {
				t.Errorf("Authorization:\n%s\nwant:\n%s", got, want)
			}
			if strings.Contains(req.URL.String(), secretKey) {
				t.Error("the URL holds the secret")
			}
		})
	}
}

func TestURIEncode(t *testing.T) {
	for in, want := range map[string]string{
		"/read/a b+c":      "/read/a%20b%2Bc",
		"/a~b_c-d.e":       "/a~b_c-d.e",
		"/ü/%/?#&=*":       "/%C3%BC/%25/%3F%23%26%3D%2A",
		"/key with//slash": "/key%20with//slash",
	} {
		if got := uriEncode(in, false); got != want {
			t.Errorf("uriEncode(%q) = %q, want %q", in, got, want)
		}
		// What is sent is what is signed: net/url keeps the strict form.
		u := &url.URL{Scheme: "https", Host: "h", Path: in, RawPath: uriEncode(in, false)}
		if got := u.EscapedPath(); got != want {
			t.Errorf("EscapedPath of %q = %q, want %q", in, got, want)
		}
	}
	if got := canonicalQuery(url.Values{"prefix": {"a b/c+d"}, "list-type": {"2"}, "uploads": {""}}); got != "list-type=2&prefix=a%20b%2Fc%2Bd&uploads=" {
		t.Errorf("canonicalQuery = %q", got)
	}
}
