from compilekit.cli import main

raise SystemExit(main())
