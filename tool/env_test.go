package tool

import (
	"slices"
	"testing"
)

func TestEnvPolicy(t *testing.T) {
	in := []string{
		"PATH=/bin", "HOME=/root",
		"DEEPSEEK_API_KEY=sk-deepseek-1", "MY_KEY_VAR=sk-custom-key-1",
		"GITHUB_TOKEN=ghp_x", "AWS_SECRET_ACCESS_KEY=e", "db_password=f", "SOME_APIKEY=g", "X_SECRET=h",
		"AWS_REGION=eu", "CORP_CRED=i", "TOKENIZER=keep", "NPM_TOKEN=j",
		"COPY_OF_KEY=prefix-sk-custom-key-1", "EMPTY=",
	}
	p := EnvPolicy{
		Secrets:      []string{"DEEPSEEK_API_KEY", "MY_KEY_VAR"},
		SecretValues: []string{"sk-custom-key-1", "short", ""},
		Keep:         []string{"npm_token", "DEEPSEEK_API_KEY", "MY_*"},
		Drop:         []string{"CORP_*"},
	}
	got := p.Environ(in, ForModel)
	want := []string{"PATH=/bin", "HOME=/root", "AWS_REGION=eu", "TOKENIZER=keep", "NPM_TOKEN=j", "EMPTY="}
	if !slices.Equal(got, want) {
		t.Fatalf("ForModel:\n got %v\nwant %v", got, want)
	}
	// A configured command keeps the conventional credentials (a hook
	// calling gh needs GITHUB_TOKEN), but never rein's keys or Drop.
	got = p.Environ(in, ForConfigured)
	want = []string{"PATH=/bin", "HOME=/root", "GITHUB_TOKEN=ghp_x", "AWS_SECRET_ACCESS_KEY=e", "db_password=f", "SOME_APIKEY=g", "X_SECRET=h",
		"AWS_REGION=eu", "TOKENIZER=keep", "NPM_TOKEN=j", "EMPTY="}
	if !slices.Equal(got, want) {
		t.Fatalf("ForConfigured:\n got %v\nwant %v", got, want)
	}
	if len(in) != 15 || in[2] != "DEEPSEEK_API_KEY=sk-deepseek-1" {
		t.Fatal("input modified")
	}
	// The zero policy still removes credential-looking names for the model:
	// the conventional ones of databases and agents too.
	for _, kv := range []string{"PGPASSWORD=pw", "MYSQL_PWD=pw", "DATABASE_URL=postgres://u:pw@h/db", "APP_DATABASE_URL=x",
		"SENTRY_DSN=x", "AZURE_STORAGE_CONNECTION_STRING=x", "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "REDIS_PASSWD=x"} {
		if got := (EnvPolicy{}).Environ([]string{kv}, ForModel); len(got) != 0 {
			t.Errorf("zero policy kept %s", kv)
		}
	}
	if got := (EnvPolicy{}).Environ([]string{"PWD=/w", "OLDPWD=/v", "PASSWORDLESS=1"}, ForModel); len(got) != 3 {
		t.Errorf("zero policy: %v, want all kept", got)
	}
	if got := (EnvPolicy{}).Environ([]string{"OPENAI_API_KEY=x", "A=b"}, ForModel); !slices.Equal(got, []string{"A=b"}) {
		t.Fatalf("zero policy: %v", got)
	}
}
