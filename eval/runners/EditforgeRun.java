// The Java run step's main: the tests' Main.main, then the run token from descriptor 3 to 4. A
// program that exits (System.exit, a shutdown hook, a static initializer) never reaches the copy.
public class EditforgeRun {
    public static void main(String[] args) throws Throwable {
        Main.main(args);
        try (java.io.FileInputStream key = new java.io.FileInputStream("/dev/fd/3");
             java.io.FileOutputStream report = new java.io.FileOutputStream("/dev/fd/4")) {
            byte[] token = new byte[64];
            int n = key.read(token);
            if (n > 0) {
                report.write(token, 0, n);
            }
        } catch (java.io.IOException e) {
        }
    }
}
