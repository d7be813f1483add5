package txnchaos.javaclient;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RetriableException;

/**
 * What a failed call means for the caller, in the harness's four classes (fatal, abortable,
 * retriable, other: harness/workload/recording.py's ErrorClass). A producer's own state decides
 * first, as the application sees it: its transaction manager is in a fatal or an abortable
 * error state (read through reflection: the client keeps them internal); then a retriable
 * exception (a timeout: the call may be repeated); anything else is "other".
 */
final class Failures {
    private Failures() {}

    static String describe(Throwable e, Object transactionManager) {
        return new Lines.Json()
                .put("class", classOf(e, transactionManager))
                .put("name", name(e))
                .put("message", message(e))
                .toString();
    }

    static String classOf(Throwable e, Object tm) {
        if (tm != null) {
            if (Reflect.flag(tm, "hasFatalError")) return "fatal";
            if (Reflect.flag(tm, "hasAbortableError")) return "abortable";
        }
        if (e instanceof RetriableException || e instanceof InterruptException) return "retriable";
        return "other";
    }

    /** The exception's simple name, with its cause's when it only wraps one. */
    static String name(Throwable e) {
        String n = e.getClass().getSimpleName();
        Throwable c = e.getCause();
        if (c != null && c != e && e.getClass() == org.apache.kafka.common.KafkaException.class) {
            n = n + "(" + c.getClass().getSimpleName() + ")";
        }
        return n;
    }

    static String message(Throwable e) {
        String m = e.getMessage();
        return m == null ? "" : m;
    }

    /** Reflection on the client's internals (the classpath is the unnamed module: allowed). */
    static final class Reflect {
        private Reflect() {}

        static Object field(Object o, String name) {
            for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
                try {
                    Field f = c.getDeclaredField(name);
                    f.setAccessible(true);
                    return f.get(o);
                } catch (NoSuchFieldException e) {
                    // the superclass may have it
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                }
            }
            throw new IllegalStateException(o.getClass().getName() + " has no field " + name);
        }

        static Method method(Object o, String name, Class<?>... types) {
            for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
                try {
                    Method m = c.getDeclaredMethod(name, types);
                    m.setAccessible(true);
                    return m;
                } catch (NoSuchMethodException e) {
                    // the superclass may have it
                }
            }
            return null;
        }

        static Object call(Object o, String name) {
            Method m = method(o, name);
            if (m == null) throw new IllegalStateException(o.getClass().getName() + " has no " + name + "()");
            try {
                return m.invoke(o);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }

        static boolean flag(Object o, String name) {
            return Boolean.TRUE.equals(call(o, name));
        }

        /** A producer id and epoch object (ProducerIdAndEpoch: fields; PreparedTxnState: methods). */
        static long[] idAndEpoch(Object o) {
            try {
                Object pid = field(o, "producerId");
                Object epoch = field(o, "epoch");
                return new long[] {((Number) pid).longValue(), ((Number) epoch).longValue()};
            } catch (IllegalStateException e) {
                Object pid = call(o, "producerId");
                Object epoch = call(o, "epoch");
                return new long[] {((Number) pid).longValue(), ((Number) epoch).longValue()};
            }
        }
    }
}
