package txnchaos.javaclient;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * KIP-939's producer API (initTransactions(boolean keepPreparedTxn), prepareTransaction(),
 * completeTransaction(PreparedTxnState)), reached through reflection: the program is compiled
 * against the oldest supported client, and no kafka-clients release up to 4.4.0 has these
 * public methods (4.1 to 4.4 carry parts of it inside their TransactionManager, but never send
 * InitProducerId's Enable2Pc or KeepPreparedTxn). {@link #supported()} says whether the client
 * on the classpath has them; the harness refuses 2PC when it does not.
 */
final class TwoPhase {
    private TwoPhase() {}

    private static Method publicMethod(String name, Class<?>... types) {
        try {
            return KafkaProducer.class.getMethod(name, types);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    private static Class<?> stateClass() {
        try {
            return Class.forName("org.apache.kafka.clients.producer.PreparedTxnState");
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    static boolean supported() {
        Class<?> state = stateClass();
        return state != null
                && publicMethod("initTransactions", boolean.class) != null
                && publicMethod("prepareTransaction") != null
                && publicMethod("completeTransaction", state) != null;
    }

    private static Object invoke(Method m, Object target, Object... args) throws Exception {
        if (m == null) {
            throw new UnsupportedOperationException("KIP-939 two-phase commit is not supported by kafka-clients "
                    + Driver.clientVersion() + ": its KafkaProducer has no initTransactions(boolean), "
                    + "prepareTransaction() and completeTransaction(PreparedTxnState)");
        }
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) throw (Exception) cause;
            throw e;
        }
    }

    static void initKeepPrepared(KafkaProducer<?, ?> producer) throws Exception {
        invoke(publicMethod("initTransactions", boolean.class), producer, true);
    }

    /** The prepared transaction's state, "producerId:epoch" (KIP-939's PreparedTxnState text). */
    static String prepare(KafkaProducer<?, ?> producer) throws Exception {
        Object state = invoke(publicMethod("prepareTransaction"), producer);
        return stateText(state);
    }

    /** Commits when {@code text} names the prepared transaction, else aborts; whether it committed. */
    static boolean complete(KafkaProducer<?, ?> producer, Object transactionManager, String text) throws Exception {
        Class<?> cls = stateClass();
        if (cls == null) throw new UnsupportedOperationException("no PreparedTxnState class");
        Constructor<?> make = text.isEmpty() ? cls.getConstructor() : cls.getConstructor(String.class);
        Object given = text.isEmpty() ? make.newInstance() : make.newInstance(text);
        String ongoing = preparedState(transactionManager);
        boolean commit = !ongoing.isEmpty() && ongoing.equals(stateText(given));
        invoke(publicMethod("completeTransaction", cls), producer, given);
        return commit;
    }

    /** The transaction a keep-prepared init found prepared ("" for none), from the client's state. */
    static String preparedState(Object transactionManager) {
        Method m = Failures.Reflect.method(transactionManager, "preparedTransactionState");
        if (m == null) return "";
        Object state;
        try {
            state = m.invoke(transactionManager);
        } catch (ReflectiveOperationException e) {
            return "";
        }
        return stateText(state);
    }

    private static String stateText(Object state) {
        if (state == null) return "";
        long[] v = Failures.Reflect.idAndEpoch(state);
        return v[0] < 0 || v[1] < 0 ? "" : v[0] + ":" + v[1];
    }
}
