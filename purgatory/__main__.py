from purgatory.cli import main

raise SystemExit(main())
