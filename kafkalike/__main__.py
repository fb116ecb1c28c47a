from kafkalike.cli.main import main

raise SystemExit(main())
