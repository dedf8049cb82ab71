import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Properties;
import java.util.TreeSet;

// Loads each file named on the command line as Kafka does
// (Properties.load(InputStream)) and prints "== file" then one
// "key<TAB>value" line per property, sorted, every character outside
// printable ASCII (and backslash and tab) as \\uXXXX; a file Java refuses
// prints "ERROR".
public class Dump {
    static String esc(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c < 0x20 || c > 0x7e || c == '\\') b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        for (String f : args) {
            System.out.println("== " + f);
            Properties p = new Properties();
            try (InputStream in = new FileInputStream(f)) {
                p.load(in);
            } catch (IllegalArgumentException e) {
                System.out.println("ERROR");
                continue;
            }
            for (String k : new TreeSet<>(p.stringPropertyNames())) {
                System.out.println(esc(k) + "\t" + esc(p.getProperty(k)));
            }
        }
    }
}
