import java.io.File;
import org.jacoco.core.analysis.Analyzer;
import org.jacoco.core.analysis.CoverageBuilder;
import org.jacoco.core.analysis.ICounter;
import org.jacoco.core.analysis.ISourceFileCoverage;
import org.jacoco.core.tools.ExecFileLoader;

public class CoverageDump {
    public static void main(String[] args) throws Exception {
        ExecFileLoader loader = new ExecFileLoader();
        loader.load(new File("jacoco.exec"));
        CoverageBuilder builder = new CoverageBuilder();
        new Analyzer(loader.getExecutionDataStore(), builder).analyzeAll(new File("classes"));
        for (ISourceFileCoverage source : builder.getSourceFiles()) {
            for (int i = source.getFirstLine(); i <= source.getLastLine(); i++) {
                int status = source.getLine(i).getStatus();
                if (status != ICounter.EMPTY) System.out.println(i + " " + (status == ICounter.NOT_COVERED ? 0 : 1));
            }
        }
    }
}
