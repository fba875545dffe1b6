package tool

import (
	"slices"
	"testing"
)

func TestSafeEnv(t *testing.T) {
	in := []string{
		"PATH=/bin", "HOME=/root",
		"DEEPSEEK_API_KEY=a", "OPENAI_API_KEY=b", "ANTHROPIC_API_KEY=c",
		"GITHUB_TOKEN=d", "AWS_SECRET_ACCESS_KEY=e", "db_password=f", "SOME_APIKEY=g", "X_SECRET=h",
		"AWS_REGION=eu", "CORP_CRED=i", "TOKENIZER=keep", "NPM_TOKEN=j",
	}
	got := SafeEnv(in, []string{"CORP_*", "!NPM_TOKEN", "!OPENAI_API_KEY"})
	want := []string{"PATH=/bin", "HOME=/root", "AWS_REGION=eu", "TOKENIZER=keep", "NPM_TOKEN=j"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v", got)
	}
	if len(in) != 14 || in[2] != "DEEPSEEK_API_KEY=a" {
		t.Fatal("input modified")
	}
}
