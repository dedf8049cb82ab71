package kafka

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kremedy/kremedy/internal/javaprops"
	"github.com/kremedy/kremedy/internal/javatls"
)

// ErrUnsupportedProperty is a client property kremedy cannot honour; it
// refuses rather than silently connecting some other way.
var ErrUnsupportedProperty = javatls.ErrUnsupported

// ParseProperties reads a client.properties file as Kafka's clients do:
// java.util.Properties (javaprops), then the config provider references
// (${file:path:key}, ${directory:path:file}, ${env:NAME}) of the providers
// the file declares in config.providers, resolved as Kafka's
// ConfigTransformer resolves them. A reference kremedy cannot resolve is
// an error naming the key and its line; Kafka would instead send the text
// "${…}" as the value (a wrong password, found only at authentication).
func ParseProperties(data []byte) (map[string]string, error) {
	p, err := javaprops.Parse(data)
	if err != nil {
		return nil, err
	}
	providers, err := configProviders(p)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(p.Values))
	keys := make([]string, 0, len(p.Values))
	for k := range p.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := resolve(p.Values[k], providers)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", p.Lines[k], k, err)
		}
		out[k] = v
	}
	return out, nil
}

// variable is Kafka's ConfigTransformer.DEFAULT_PATTERN: ${provider:[path:]key}.
var variable = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// provider is one config.providers entry kremedy can run in-process.
type provider struct {
	name, class string
	// allowed is the provider's allowed.paths (Kafka 3.5+); empty allows all.
	allowed []string
	// allowlist is EnvVarConfigProvider's allowlist.pattern.
	allowlist *regexp.Regexp
}

const (
	fileProvider = "org.apache.kafka.common.config.provider.FileConfigProvider"
	dirProvider  = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
	envProvider  = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
)

func configProviders(p javaprops.Properties) (map[string]provider, error) {
	out := map[string]provider{}
	list, ok := p.Get("config.providers")
	if !ok {
		return out, nil
	}
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		key := "config.providers." + name + ".class"
		class := p.Values[key]
		switch class {
		case fileProvider, dirProvider, envProvider:
		case "":
			return nil, fmt.Errorf("line %d: config.providers names %q but %s is unset (Kafka refuses this too)", p.Lines["config.providers"], name, key)
		default:
			return nil, fmt.Errorf("line %d: %s=%s: %w: kremedy runs only Kafka's FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider in-process; write the value into the file (readable only by you) or use one of those", p.Lines[key], key, class, ErrUnsupportedProperty)
		}
		pr := provider{name: name, class: class}
		if v := p.Values["config.providers."+name+".param.allowed.paths"]; v != "" {
			for _, a := range strings.Split(v, ",") {
				pr.allowed = append(pr.allowed, filepath.Clean(strings.TrimSpace(a)))
			}
		}
		if v, ok := p.Values["config.providers."+name+".param.allowlist.pattern"]; ok {
			re, err := regexp.Compile("^(?:" + v + ")$")
			if err != nil {
				return nil, fmt.Errorf("config.providers.%s.param.allowlist.pattern: %w", name, err)
			}
			pr.allowlist = re
		}
		out[name] = pr
	}
	return out, nil
}

// resolve replaces every ${provider:path:key} in v.
func resolve(v string, providers map[string]provider) (string, error) {
	var firstErr error
	out := variable.ReplaceAllStringFunc(v, func(m string) string {
		g := variable.FindStringSubmatch(m)
		name, path, key := g[1], g[3], g[4]
		pr, ok := providers[name]
		if !ok {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: config.providers does not name %q, so Kafka would send this text itself as the value; declare the provider (config.providers=%s, config.providers.%s.class=…) or write the value", m, name, name, name)
			}
			return m
		}
		val, err := pr.lookup(path, key)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", m, err)
		}
		return val
	})
	return out, firstErr
}

func (pr provider) lookup(path, key string) (string, error) {
	if pr.class == envProvider {
		if pr.allowlist != nil && !pr.allowlist.MatchString(key) {
			return "", fmt.Errorf("environment variable %s is outside config.providers.%s.param.allowlist.pattern", key, pr.name)
		}
		v, ok := os.LookupEnv(key)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", key)
		}
		return v, nil
	}
	if path == "" {
		return "", errors.New("no path (the form is ${provider:path:key})")
	}
	if !pr.allows(path) {
		return "", fmt.Errorf("%s is outside config.providers.%s.param.allowed.paths", path, pr.name)
	}
	if pr.class == dirProvider {
		// DirectoryConfigProvider: the key is a file in the directory,
		// its whole content (UTF-8) the value.
		if strings.ContainsRune(key, '/') {
			return "", fmt.Errorf("%q is not a file name in %s", key, path)
		}
		b, err := os.ReadFile(filepath.Join(path, key))
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	// FileConfigProvider reads the file through a UTF-8 Reader, not the
	// ISO-8859-1 InputStream of client.properties itself.
	p, err := javaprops.ParseUTF8(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	v, ok := p.Get(key)
	if !ok {
		return "", fmt.Errorf("%s has no key %q", path, key)
	}
	return v, nil
}

func (pr provider) allows(path string) bool {
	if len(pr.allowed) == 0 {
		return true
	}
	clean := filepath.Clean(path)
	for _, a := range pr.allowed {
		if clean == a || strings.HasPrefix(clean, a+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
