package txnchaos.javaclient;

import java.util.ArrayList;
import java.util.List;

/**
 * The line protocol's two halves: commands arrive as tab-separated fields (each escaped, see
 * {@link #split}), answers leave as one JSON object per line (built with {@link Json}).
 * harness/workload/java_client/lines.py is the Python side of both.
 */
final class Lines {
    private Lines() {}

    /** The field that stands for null (an escaped field never equals it). */
    static final String NULL = "\\N";

    /**
     * A command line's fields. Inside a field a backslash escapes: {@code \\} backslash,
     * {@code \t} tab, {@code \n} newline, {@code \r} carriage return; a field that is exactly
     * {@code \N} is null.
     */
    static List<String> split(String line) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        boolean escaped = false;
        boolean wasNull = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (escaped) {
                escaped = false;
                switch (c) {
                    case '\\': cur.append('\\'); break;
                    case 't': cur.append('\t'); break;
                    case 'n': cur.append('\n'); break;
                    case 'r': cur.append('\r'); break;
                    case 'N':
                        if (cur.length() != 0) throw new IllegalArgumentException("\\N inside a field");
                        wasNull = true;
                        break;
                    default: throw new IllegalArgumentException("bad escape \\" + c);
                }
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '\t') {
                out.add(wasNull ? null : cur.toString());
                cur.setLength(0);
                wasNull = false;
            } else {
                if (wasNull) throw new IllegalArgumentException("\\N inside a field");
                cur.append(c);
            }
        }
        if (escaped) throw new IllegalArgumentException("line ends inside an escape");
        out.add(wasNull ? null : cur.toString());
        return out;
    }

    /** A JSON object written field by field (strings escaped per RFC 8259). */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");
        private boolean first = true;

        private Json key(String k) {
            if (!first) sb.append(',');
            first = false;
            quote(sb, k);
            sb.append(':');
            return this;
        }

        Json put(String k, long v) { key(k).sb.append(v); return this; }

        Json put(String k, boolean v) { key(k).sb.append(v); return this; }

        Json put(String k, String v) {
            key(k);
            if (v == null) sb.append("null"); else quote(sb, v);
            return this;
        }

        /** A value already in JSON (an array or object built by the caller). */
        Json raw(String k, String json) { key(k).sb.append(json); return this; }

        @Override public String toString() { return sb + "}"; }
    }

    static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
            }
        }
        sb.append('"');
    }

    static String quoted(String s) {
        if (s == null) return "null";
        StringBuilder sb = new StringBuilder();
        quote(sb, s);
        return sb.toString();
    }
}
