from karpenter_lambda.cli.main import main

raise SystemExit(main())
